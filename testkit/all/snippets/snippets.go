// Package snippets keeps the Go in baton's documents compiling: it
// extracts every ```go block from Markdown and type-checks it against
// baton's packages (compiled in this module, testkit/all, which requires
// every baton module), so that a renamed function or field (the
// README's metrics snippet once called cfg.Lock, which never existed)
// fails a test instead of a reader.
//
// A block that starts with a package clause (after comments) is checked
// as a whole file: every error counts. Any other block is a fragment. A
// fragment is first placed in the body of a function whose parameters
// are the names documents use without declaring them (Vars: ctx, rdb,
// store, id, cfg, el, lk, s, ...), inside a block of its own so that it
// may redeclare them with :=; if it does not parse there, it is placed at
// the top level of a file, for fragments that declare functions or
// types. A fragment's file imports the packages of Imports and may use
// any of them. In fragments, "declared and not used" and "imported and
// not used" are not errors (go/types calls them soft): a fragment shows a
// call, not a whole program. `/* ... */` stands for elided code; a bare
// `...` does not compile.
//
// A block that is deliberately not Go (shell, program output, a
// signature in prose) uses another fence language: sh, text.
package snippets

import (
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// Block is one fenced code block of a Markdown file.
type Block struct {
	File string // the Markdown file, as given to Extract
	Line int    // line of the block's first line of code, from 1
	Lang string // the first word of the fence's info string, such as "go"
	Code string
}

// Where names the block's place, "README.md:120".
func (b Block) Where() string { return b.File + ":" + strconv.Itoa(b.Line) }

// Extract returns the fenced code blocks of the Markdown text of file
// (``` or ~~~ fences, indented at most three spaces). An unclosed fence
// is an error naming its line.
func Extract(file, text string) ([]Block, error) {
	var blocks []Block
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		fence, info, ok := openFence(lines[i])
		if !ok {
			continue
		}
		indent := len(lines[i]) - len(strings.TrimLeft(lines[i], " "))
		start := i + 1
		end := start
		for end < len(lines) && !closesFence(lines[end], fence) {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("%s:%d: code block never closed", file, i+1)
		}
		code := make([]string, 0, end-start)
		for _, l := range lines[start:end] {
			code = append(code, trimIndent(l, indent))
		}
		lang, _, _ := strings.Cut(strings.TrimSpace(info), " ")
		blocks = append(blocks, Block{File: file, Line: start + 1, Lang: lang, Code: strings.Join(code, "\n")})
		i = end
	}
	return blocks, nil
}

// openFence reports whether line opens a fenced block, and returns its
// fence (the run of ` or ~) and info string.
func openFence(line string) (fence, info string, ok bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return "", "", false
	}
	n := len(t) - len(strings.TrimLeft(t, t[:1]))
	if n < 3 || (t[0] == '`' && strings.Contains(t[n:], "`")) {
		return "", "", false
	}
	return t[:n], t[n:], true
}

// closesFence reports whether line closes a block opened by fence.
func closesFence(line, fence string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || !strings.HasPrefix(t, fence) {
		return false
	}
	return strings.Trim(strings.TrimSpace(t), fence[:1]) == ""
}

// trimIndent removes up to n leading spaces, as Markdown does for the
// lines of a block whose fence is indented n spaces.
func trimIndent(line string, n int) string {
	for n > 0 && strings.HasPrefix(line, " ") {
		line, n = line[1:], n-1
	}
	return line
}

// Imports are the packages a fragment's file imports, each under its
// package name.
var Imports = []string{
	"context", "errors", "fmt", "log", "log/slog", "net/http", "os", "time",
	"github.com/go-co-op/gocron/v2",
	"github.com/prometheus/client_golang/prometheus",
	"github.com/redis/go-redis/v9",
	"github.com/baton-go/baton/backend",
	"github.com/baton-go/baton/backend/consulbackend",
	"github.com/baton-go/baton/backend/membackend",
	"github.com/baton-go/baton/backend/redisbackend",
	"github.com/baton-go/baton/backend/springredis",
	"github.com/baton-go/baton/config",
	"github.com/baton-go/baton/config/consulconfig",
	"github.com/baton-go/baton/instanceid",
	"github.com/baton-go/baton/metrics",
	"github.com/baton-go/baton/role",
	"github.com/baton-go/baton/schedlock",
	"github.com/baton-go/baton/statuspage",
	"github.com/baton-go/baton/synclock",
}

// Vars are the names a fragment may use without declaring them, with
// their types: what a reader of the documents has at hand in a service
// that uses baton.
var Vars = [][2]string{
	{"ctx", "context.Context"},
	{"rdb", "redis.UniversalClient"},
	{"store", "*config.RedisStore"},
	{"id", "instanceid.ID"},
	{"cfg", "config.Config"},
	{"el", "*role.Elector"},
	{"lk", "*synclock.Locker"},
	{"s", "gocron.Scheduler"},
	{"def", "gocron.JobDefinition"},
	{"task", "gocron.Task"},
	{"mux", "*http.ServeMux"},
	{"logger", "*slog.Logger"},
	{"section", "func(context.Context) error"},
	{"invoiceID", "string"},
}

// Checker type-checks blocks against compiled packages.
type Checker struct {
	fset *token.FileSet
	imp  types.Importer
}

// NewChecker compiles (with go list -export, from dir, a directory of
// this module) the packages of Imports and every package the blocks'
// files import, and returns a Checker that imports them.
func NewChecker(dir string, blocks []Block) (*Checker, error) {
	want := slices.Clone(Imports)
	for _, b := range blocks {
		if f, err := parser.ParseFile(token.NewFileSet(), "", b.Code, parser.ImportsOnly); err == nil && isFile(b.Code) {
			for _, is := range f.Imports {
				p, _ := strconv.Unquote(is.Path.Value)
				want = append(want, p)
			}
		}
	}
	slices.Sort(want)
	want = slices.Compact(slices.DeleteFunc(want, func(p string) bool { return p == "unsafe" || p == "C" }))
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, want...)...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -export %s: %v\n%s", strings.Join(want, " "), err, stderr.String())
	}
	exports := make(map[string]string)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if p, file, ok := strings.Cut(line, "\t"); ok && file != "" {
			exports[p] = file
		}
	}
	fset := token.NewFileSet()
	lookup := func(p string) (io.ReadCloser, error) {
		file, ok := exports[p]
		if !ok {
			return nil, fmt.Errorf("package %s was not compiled: import it from a package block, or add it to snippets.Imports", p)
		}
		return os.Open(file)
	}
	return &Checker{fset: fset, imp: importer.ForCompiler(fset, "gc", lookup)}, nil
}

// Check type-checks b and returns its errors, each naming the Markdown
// file and line, or nil when it compiles.
func (c *Checker) Check(b Block) error {
	if isFile(b.Code) {
		return c.check(b, lineDirective(b)+b.Code, false)
	}
	body := fragmentInBody(b)
	if _, err := parser.ParseFile(token.NewFileSet(), b.File, body, parser.SkipObjectResolution); err != nil {
		top := fragmentAtTop(b)
		if _, err2 := parser.ParseFile(token.NewFileSet(), b.File, top, parser.SkipObjectResolution); err2 == nil {
			return c.check(b, top, true)
		}
	}
	return c.check(b, body, true)
}

// check parses and type-checks src, the file made of b; soft errors
// count only when fragment is false.
func (c *Checker) check(b Block, src string, fragment bool) error {
	f, err := parser.ParseFile(c.fset, b.File, src, parser.SkipObjectResolution)
	if err != nil {
		var list scanner.ErrorList
		if errors.As(err, &list) && len(list) > 3 {
			list = list[:3]
			return list.Err()
		}
		return err
	}
	var errs []error
	conf := types.Config{Importer: c.imp, Error: func(err error) {
		if te, ok := err.(types.Error); ok && te.Soft && fragment {
			return
		}
		errs = append(errs, err)
	}}
	_, _ = conf.Check("snippet", c.fset, []*ast.File{f}, nil)
	return errors.Join(errs...)
}

// isFile reports whether code starts with a package clause, after
// comments and blank lines.
func isFile(code string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", code, parser.PackageClauseOnly)
	return err == nil && f.Name != nil
}

// lineDirective makes the positions of the lines that follow it those of
// b's code in its Markdown file.
func lineDirective(b Block) string {
	return fmt.Sprintf("//line %s:%d\n", b.File, b.Line)
}

// header is the package clause and imports of a fragment's file.
func header() string {
	var h strings.Builder
	h.WriteString("package snippet\n\nimport (\n")
	for _, p := range Imports {
		fmt.Fprintf(&h, "\t%q\n", p)
	}
	h.WriteString(")\n\n")
	return h.String()
}

// fragmentInBody places b's code in a function body whose parameters are
// Vars.
func fragmentInBody(b Block) string {
	var params []string
	for _, v := range Vars {
		params = append(params, v[0]+" "+v[1])
	}
	return header() + "func snippet(" + strings.Join(params, ", ") + ") {\n\tvar err error\n\t_ = err\n\t{\n" +
		lineDirective(b) + b.Code + "\n\t}\n}\n"
}

// fragmentAtTop places b's code at the top level of a file.
func fragmentAtTop(b Block) string {
	return header() + lineDirective(b) + b.Code + "\n"
}
