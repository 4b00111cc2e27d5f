package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrBinaryNotFound is returned (wrapped) when a server program is neither
// in PATH, nor in the checkout's tool cache, nor in one of the usual system
// directories.
var ErrBinaryNotFound = errors.New("binary not found")

// fallbackDirs are searched after PATH: CI shells and IDE test runners often
// start with a PATH that lacks the sbin directories or /usr/local/bin.
var fallbackDirs = []string{"/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"}

// LookPath returns the absolute path of the named program (redis-server,
// redis-sentinel, redis-cli, consul). It looks in PATH first, then in the
// directory `make deps` builds tools into (.cache/bin at the top of the
// checkout, found from the working directory upwards), then in /usr/bin,
// /usr/sbin, /usr/local/bin and /usr/local/sbin. The error wraps
// ErrBinaryNotFound and tells the reader to run `make deps`.
func LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs, nil
		}
		return p, nil
	}
	dirs := fallbackDirs
	if cache := toolCacheDir(); cache != "" {
		dirs = append([]string{cache}, dirs...)
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, name)
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("testenv: %s not found in PATH (nor in %s): run `make deps`: %w",
		name, strings.Join(dirs, ", "), ErrBinaryNotFound)
}

// toolCacheDir returns .cache/bin of the checkout the working directory is
// in (the directory holding tools/consul/go.mod), or "" outside one.
func toolCacheDir() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "consul", "go.mod")); err == nil {
			return filepath.Join(dir, ".cache", "bin")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() {
		return false
	}
	return fi.Mode().Perm()&0o111 != 0
}
