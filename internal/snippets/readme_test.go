package snippets

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// maxReadmeLines bounds the README: a guide that fits two screens of
// prose and one program, with the detail in docs/ (DESIGN.md §5).
const maxReadmeLines = 300

// The README stays at most maxReadmeLines lines long.
func TestReadmeLength(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(text), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move the detail to docs/ and link to it", n, maxReadmeLines)
	}
}

// Every relative link of the README and docs/ leads to a file of the
// repository and, with a #fragment, to a heading of that file, so that
// moving a section between files cannot leave a link behind.
func TestDocLinks(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, f := range docs(t) {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range proseLines(string(text)) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				if err := checkLink(f, target); err != nil {
					t.Errorf("%s:%d: link %s: %v", f, n+1, target, err)
				}
			}
		}
	}
}

// proseLines returns the lines of a Markdown text with the lines of its
// fenced code blocks blanked, so that line numbers stay.
func proseLines(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		fence := strings.HasPrefix(strings.TrimSpace(l), "```") || strings.HasPrefix(strings.TrimSpace(l), "~~~")
		if in || fence {
			lines[i] = ""
		}
		if fence {
			in = !in
		}
	}
	return lines
}

// checkLink checks target, a link in the Markdown file from (both relative
// to root).
func checkLink(from, target string) error {
	path, frag, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		file = filepath.Join(filepath.Dir(from), path)
	}
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		if _, serr := os.Stat(filepath.Join(root, file)); serr == nil && frag == "" {
			return nil // a directory
		}
		return err
	}
	if frag == "" || !strings.HasSuffix(file, ".md") {
		return nil
	}
	for _, l := range proseLines(string(data)) {
		if h, ok := strings.CutPrefix(l, "#"); ok && slug(strings.TrimLeft(h, "# ")) == frag {
			return nil
		}
	}
	return fmt.Errorf("%s has no heading #%s", file, frag)
}

// slug is the anchor GitHub gives a heading: lower case, punctuation
// dropped, spaces as hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
