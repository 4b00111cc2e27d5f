// Command afterfatal reports statements that can never run because they
// follow, in the same block, a call that ends the goroutine: t.Fatal,
// t.Fatalf, t.FailNow, t.Skip, t.Skipf, t.SkipNow (on any receiver),
// log.Fatal*, runtime.Goexit, os.Exit or panic. A check written after such a
// call looks like a test but cannot fail. `make test` runs it on every
// *_test.go file of the module:
//
//	go run ./internal/afterfatal [dir ...]
//
// It exits 1 and lists file:line of each unreachable statement, or exits 0.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	dirs := os.Args[1:]
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	var found []string
	for _, dir := range dirs {
		hits, err := checkTree(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "afterfatal:", err)
			os.Exit(2)
		}
		found = append(found, hits...)
	}
	if len(found) > 0 {
		fmt.Fprintln(os.Stderr, "afterfatal: these statements follow a call that ends the goroutine, so they never run:")
		for _, f := range found {
			fmt.Fprintln(os.Stderr, "  "+f)
		}
		os.Exit(1)
	}
}

// checkTree checks every *_test.go file under dir, skipping testdata,
// vendor and hidden directories and nested modules.
func checkTree(dir string) ([]string, error) {
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != dir && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			if path != dir {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // a nested module is checked on its own
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		hits, err := checkFile(path, src)
		if err != nil {
			return err
		}
		found = append(found, hits...)
		return nil
	})
	sort.Strings(found)
	return found, err
}

// checkFile returns "file:line: text" for each unreachable statement in src.
func checkFile(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return nil, err
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		var list []ast.Stmt
		switch b := n.(type) {
		case *ast.BlockStmt:
			list = b.List
		case *ast.CaseClause:
			list = b.Body
		case *ast.CommClause:
			list = b.Body
		default:
			return true
		}
		for i, s := range list[:max(len(list)-1, 0)] {
			if call, ok := terminalCall(s); ok {
				next := list[i+1]
				if _, isLabel := next.(*ast.LabeledStmt); isLabel {
					continue // reachable by a goto
				}
				pos := fset.Position(next.Pos())
				found = append(found, fmt.Sprintf("%s:%d: after %s on line %d", pos.Filename, pos.Line, call, fset.Position(s.Pos()).Line))
			}
		}
		return true
	})
	return found, nil
}

// terminalCall reports whether s is a call that never returns, and names it.
func terminalCall(s ast.Stmt) (string, bool) {
	es, ok := s.(*ast.ExprStmt)
	if !ok {
		return "", false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok {
		return "", false
	}
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		if fn.Name == "panic" {
			return "panic", true
		}
	case *ast.SelectorExpr:
		return terminalSelector(fn)
	}
	return "", false
}

// terminalSelector reports whether fn, a selected function, never returns:
// runtime.Goexit, os.Exit, log.Fatal*, or a method that ends a test on any
// receiver; and names it.
func terminalSelector(fn *ast.SelectorExpr) (string, bool) {
	name := fn.Sel.Name
	if recv, ok := fn.X.(*ast.Ident); ok && packageExit(recv.Name, name) {
		return recv.Name + "." + name, true
	}
	if endsTest(name) {
		return "." + name, true
	}
	return "", false
}

// packageExit reports whether pkg.name is runtime.Goexit, os.Exit or one
// of log.Fatal*.
func packageExit(pkg, name string) bool {
	switch pkg {
	case "runtime":
		return name == "Goexit"
	case "os":
		return name == "Exit"
	case "log":
		return strings.HasPrefix(name, "Fatal")
	}
	return false
}

// endsTest reports whether a method of this name ends a test's goroutine
// (testing.TB's Fatal, Fatalf, FailNow, Skip, Skipf and SkipNow).
func endsTest(name string) bool {
	switch name {
	case "Fatal", "Fatalf", "FailNow", "Skip", "Skipf", "SkipNow":
		return true
	}
	return false
}
