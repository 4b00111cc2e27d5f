package bench

import (
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
)

var updateReadme = flag.Bool("update", false, "rewrite the top-level README's lock figures from results.json")

// The lock rows of the top-level README's Benchmarks table, and the
// sentence that dates them, are ReadmeLockRows of results.json; with
// -update the test writes them there.
func TestReadmeFigures(t *testing.T) {
	data, err := os.ReadFile("results.json")
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	const path = "../README.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start := strings.Index(readme, "| lock, uncontended |")
	end := strings.Index(readme[max(start, 0):], "\n\n") // the sentence's paragraph ends the section
	if start < 0 || end < 0 {
		t.Fatalf("%s has no lock rows in its Benchmarks table", path)
	}
	end = start + end
	if next := strings.Index(readme[end+2:], "\n\n"); next >= 0 {
		end = end + 2 + next
	}
	want := ReadmeLockRows(&r)
	got := readme[start:end] + "\n"
	if got == want {
		return
	}
	if *updateReadme {
		if err := os.WriteFile(path, []byte(readme[:start]+want+readme[end+1:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			t.Fatalf("%s's lock figures differ from results.json at line %d:\nREADME:       %s\nresults.json: %s\n(run go test ./bench -run TestReadmeFigures -update)", path, i, gl[i], wl[i])
		}
	}
	t.Fatalf("%s's lock figures have %d lines, results.json's %d (run go test ./bench -run TestReadmeFigures -update)", path, len(gl), len(wl))
}
