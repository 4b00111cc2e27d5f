package baton_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A service that uses Redis only pulls only what it uses: a module that
// imports role, synclock, schedlock and redisbackend (and, in the second
// case, config) lists no module of the optional parts (the Consul store,
// the metrics adapter, the examples' in-process Redis) in go list -m all,
// and not more modules than the bound.
//
// The bounds count the user's module and baton, plus what go-redis
// v9.23.0 and gocron v2.21.2 require in their go.mod files (go-redis:
// ginkgo, gomega, xxhash, xxh3, atomic, x/sys, cpuid; gocron: uuid,
// clockwork, cron, testify, goleak, go-spew, kr/text, go-difflib,
// check.v1, gopkg.in/yaml.v3), which baton cannot change: 21. Baton's own
// go.mod adds config's two parsers (go.yaml.in/yaml/v3 and
// pelletier/go-toml/v2), which every module that requires baton lists
// even when it does not import config: 23. Importing config adds
// testify's objx, which go-toml's go.mod brings in: 24.
func TestRedisOnlyModuleGraph(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module outside the checkout with the go command (module proxy or cache): not in -short")
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	imports := []string{"backend/redisbackend", "role", "schedlock", "synclock"}
	for _, tc := range []struct {
		name    string
		imports []string
		bound   int
	}{
		{"four imports", imports, 23},
		{"with config", append(imports, "config"), 24},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mods := moduleGraph(t, root, tc.imports)
			for _, m := range mods {
				for _, bad := range []string{"consul", "hashicorp", "prometheus", "miniredis", "gopher-lua", "koanf", "protobuf"} {
					if strings.Contains(m, bad) {
						t.Errorf("module %s is in the graph of a Redis-only service (%s); all modules:\n%s", m, bad, strings.Join(mods, "\n"))
					}
				}
			}
			if len(mods) > tc.bound {
				t.Errorf("go list -m all lists %d modules, want at most %d:\n%s", len(mods), tc.bound, strings.Join(mods, "\n"))
			}
		})
	}
}

// moduleGraph makes a module in a temporary directory whose main package
// imports the baton packages imports, with baton replaced by the checkout
// at root, and returns what go list -m all lists for it (module paths,
// versions dropped). The go command runs with the module proxy and cache
// of the environment, outside any workspace, without the checksum
// database (the test builds nothing it ships).
func moduleGraph(t *testing.T, root string, imports []string) []string {
	t.Helper()
	dir := t.TempDir()
	mod := "module example.com/redisonly\n\ngo 1.26.0\n\nreplace github.com/baton-go/baton => " + root + "\n"
	var src strings.Builder
	src.WriteString("package main\n\nimport (\n")
	for _, p := range imports {
		src.WriteString("\t_ \"github.com/baton-go/baton/" + p + "\"\n")
	}
	src.WriteString(")\n\nfunc main() {}\n")
	for name, text := range map[string]string{"go.mod": mod, "main.go": src.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd(t, dir, "mod", "tidy")
	goCmd(t, dir, "build", "-o", os.DevNull, ".")
	var mods []string
	for line := range strings.Lines(goCmd(t, dir, "list", "-m", "all")) {
		if f := strings.Fields(line); len(f) > 0 {
			mods = append(mods, f[0])
		}
	}
	return mods
}

// goCmd runs the go command in dir, bounded by five minutes (a cold
// module cache downloads), and returns its standard output.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOSUMDB=off")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}
