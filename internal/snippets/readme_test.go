package snippets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
