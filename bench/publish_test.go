package bench

import (
	"os/exec"
	"strings"
	"testing"
)

// A benchmark run on a developer's machine must not rewrite the published
// figures that TestReadmeFigures compares with the README: make bench-role
// (and so make bench) writes gobench.txt to a scratch directory unless
// PUBLISH=1 asks for bench/. make -n prints bench-role's recipe without
// running it (the target calls no sub-make, so nothing runs).
func TestBenchWritesPublishedFiguresOnlyWhenAsked(t *testing.T) {
	make, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make not found: %v (the repository's entry points need GNU make)", err)
	}
	recipe := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(make, append([]string{"-n", "-C", "..", "bench-role"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("make -n bench-role %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	const published = "> bench/gobench.txt"
	if r := recipe(); strings.Contains(r, published) || !strings.Contains(r, "> .cache/bench/gobench.txt") {
		t.Errorf("make bench-role without PUBLISH does not write to .cache/bench only:\n%s", r)
	}
	if r := recipe("PUBLISH=1"); !strings.Contains(r, published) {
		t.Errorf("make bench-role PUBLISH=1 does not write %s:\n%s", published, r)
	}
}
