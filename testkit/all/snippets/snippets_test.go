package snippets

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root directory, three levels up; the
// packages the blocks use are compiled in this module (testkit/all),
// which requires every baton module.
const root = "../../.."

// docs returns the Markdown files whose Go must compile: the README and
// every .md file under docs/, as paths relative to root.
func docs(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Every ```go block of the README and docs/ compiles against this module
// (the README's metrics snippet called cfg.Lock, its status page snippet
// passed a config.Config where role.NewElector takes a role.Config, and
// its feature list used `{ ... }` as a function body).
func TestDocsCompile(t *testing.T) {
	var blocks []Block
	for _, f := range docs(t) {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		bs, err := Extract(f, string(text))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.Lang == "" {
				t.Errorf("%s: a code block without a language: write go for Go (it is then compiled), or text, sh, yaml, ... for anything else", b.Where())
			}
			if b.Lang == "go" {
				blocks = append(blocks, b)
			}
		}
	}
	if len(blocks) == 0 {
		t.Fatal("no go block in the README and docs/: is the extraction broken?")
	}
	c, err := NewChecker(".", blocks)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if err := c.Check(b); err != nil {
			t.Errorf("the go block at %s does not compile (a block that is not Go takes another fence language, such as text):\n%v", b.Where(), err)
		}
	}
}

// The harness itself: where blocks are, what counts as an error in a
// fragment and in a file, and that errors name the Markdown line.
func TestChecker(t *testing.T) {
	doc := "# T\n\n```go\nel, err := role.NewElector(store, id, cfg.Role)\n```\n\n" + // 4: compiles (err unused: soft)
		"```go\nlk, err := synclock.NewLocker(store, id, cfg.Lock)\n```\n\n" + // 8: no field Lock
		"```go\nerr := lk.DoKey(ctx, \"k\", func(ctx context.Context) error { ... })\n```\n\n" + // 12: syntax
		"```go\nfunc handler(w http.ResponseWriter, r *http.Request) {\n\tif role.IsMaster() {\n\t\tfmt.Fprintln(w, \"master\")\n\t}\n}\n```\n\n" + // 16: top level
		"```go\npackage main\n\nimport \"fmt\"\n\nfunc main() { x := 1 }\n```\n\n" + // 24: a file: unused x counts
		"~~~text\nnot go\n~~~\n"
	blocks, err := Extract("DOC.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, b := range blocks {
		lines = append(lines, b.Line)
	}
	if !slices.Equal(lines, []int{4, 8, 12, 16, 24, 32}) || blocks[5].Lang != "text" {
		t.Fatalf("Extract found %d blocks at lines %v", len(blocks), lines)
	}
	c, err := NewChecker(".", blocks[:5])
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "DOC.md:8:", "DOC.md:12:", "", "DOC.md:28:"} {
		err := c.Check(blocks[i])
		switch {
		case want == "" && err != nil:
			t.Errorf("block at %s: %v; want it to compile", blocks[i].Where(), err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("block at %s: %v; want an error at %s", blocks[i].Where(), err, want)
		}
	}
	if _, err := Extract("DOC.md", "```go\nx := 1\n"); err == nil || !strings.Contains(err.Error(), "DOC.md:1: code block never closed") {
		t.Errorf("unclosed fence: %v", err)
	}
}
