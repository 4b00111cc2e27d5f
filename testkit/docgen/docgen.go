// Package docgen keeps the generated parts of a document, such as the
// README's figures and reference tables, in step with their sources.
//
// A generated part sits between two comment lines that Markdown does not
// render,
//
//	<!-- begin NAME: generated; HOW rewrites it -->
//
//	...the part...
//
//	<!-- end NAME -->
//
// and a test of the package that owns the source compares it with what the
// source gives now (Check). The blank lines keep the comments out of the
// part's tables and paragraphs.
package docgen

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Check compares the part named name of the file at path with want. On a
// difference it fails t, naming the first line that differs and how to
// regenerate the part, unless update is set: then it writes want there
// (and the begin line, which carries how). how is the command that
// rewrites the part, such as "go test ./config -run TestReadmeReference
// -update".
func Check(t testing.TB, path, name, how, want string, update bool) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	got, start, end, err := Part(doc, name)
	if err != nil {
		t.Fatalf("%s: %v (add the two comment lines where the part goes; %s fills it)", path, err, how)
	}
	beginLine := "<!-- begin " + name + ": generated; " + how + " rewrites it -->\n\n"
	if got == want && strings.HasSuffix(doc[:start], beginLine) {
		return
	}
	if update {
		lineStart := strings.LastIndex(doc[:start], "<!-- begin "+name+":")
		out := doc[:lineStart] + beginLine + want + doc[end:]
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			t.Fatalf("%s: %s differs from its source at its line %d:\n%s: %s\nsource: %s\n(run %s)", path, name, i+1, path, gl[i], wl[i], how)
		}
	}
	if len(gl) != len(wl) {
		t.Fatalf("%s: %s has %d lines, its source gives %d (run %s)", path, name, len(gl), len(wl), how)
	}
	t.Fatalf("%s: the begin line of %s does not say how to rewrite it (run %s)", path, name, how)
}

// Part returns the part named name of doc, without the blank lines that
// frame it, and where it starts and ends in doc.
func Part(doc, name string) (part string, start, end int, err error) {
	begin := "<!-- begin " + name + ":"
	b := strings.Index(doc, begin)
	if b < 0 {
		return "", 0, 0, fmt.Errorf("no line %q...", begin)
	}
	nl := strings.Index(doc[b:], "-->\n")
	if nl < 0 {
		return "", 0, 0, fmt.Errorf("the line %q... does not end with -->", begin)
	}
	start = b + nl + len("-->\n")
	if !strings.HasPrefix(doc[start:], "\n") {
		return "", 0, 0, fmt.Errorf("no blank line after %q...", begin)
	}
	start++
	endLine := "\n<!-- end " + name + " -->"
	// From the blank line on, so that an empty part is found too.
	e := strings.Index(doc[start-1:], endLine)
	if e < 0 {
		return "", 0, 0, fmt.Errorf("no line %q after %q...", strings.TrimSpace(endLine), begin)
	}
	end = start - 1 + e
	return doc[start:max(start, end)], start, end, nil
}

// ReadJSON decodes the JSON file at path, a generated part's source such
// as a benchmark's results, into v; it fails t if the file cannot be read
// or decoded.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
