package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckFileFindsStatementsAfterFatal(t *testing.T) {
	hits, err := checkFixture("unreachable.go.txt")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"x_test.go:8: after .Fatalf on line 7", "x_test.go:13: after .FailNow on line 12", "x_test.go:18: after .Skip on line 17", "x_test.go:22: after panic on line 21"}
	if strings.Join(hits, "\n") != strings.Join(want, "\n") {
		t.Errorf("hits:\n%s\nwant:\n%s", strings.Join(hits, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckFileAcceptsReachableCode(t *testing.T) {
	hits, err := checkFixture("reachable.go.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 0 {
		t.Errorf("false alarms: %v", hits)
	}
}

// checkFixture checks testdata/name as the test file x_test.go. The
// fixtures live in testdata, not in this file, so that no tool that reads
// test files mistakes their unreachable statements for this package's.
func checkFixture(name string) ([]string, error) {
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		return nil, err
	}
	return checkFile("x_test.go", src)
}
