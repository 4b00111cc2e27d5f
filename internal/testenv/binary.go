package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrBinaryNotFound is returned (wrapped) when a Redis program is neither in
// PATH nor in one of the usual system directories.
var ErrBinaryNotFound = errors.New("binary not found")

// fallbackDirs are searched after PATH: CI shells and IDE test runners often
// start with a PATH that lacks the sbin directories or /usr/local/bin.
var fallbackDirs = []string{"/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"}

// LookPath returns the absolute path of the named program (redis-server,
// redis-sentinel, redis-cli). It looks in PATH first and then in /usr/bin,
// /usr/sbin, /usr/local/bin and /usr/local/sbin. The error wraps
// ErrBinaryNotFound and tells the reader to run `make deps`.
func LookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs, nil
		}
		return p, nil
	}
	for _, dir := range fallbackDirs {
		p := filepath.Join(dir, name)
		if isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("testenv: %s not found in PATH (nor in %s): run `make deps`: %w",
		name, strings.Join(fallbackDirs, ", "), ErrBinaryNotFound)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() {
		return false
	}
	return fi.Mode().Perm()&0o111 != 0
}
