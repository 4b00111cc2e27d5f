package main

import (
	"strings"
	"testing"
)

func TestCheckFileFindsStatementsAfterFatal(t *testing.T) {
	src := `package x

import "testing"

func TestX(t *testing.T) {
	if err := f(); err != nil {
		t.Fatalf("f: %v", err)
		check(t)
	}
	switch {
	case true:
		t.FailNow()
		t.Log("never")
	}
	select {
	default:
		t.Skip("skip")
		t.Log("never")
	}
	func() {
		panic("x")
		t.Log("never")
	}()
}
`
	hits, err := checkFile("x_test.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"x_test.go:8: after .Fatalf on line 7", "x_test.go:13: after .FailNow on line 12", "x_test.go:18: after .Skip on line 17", "x_test.go:22: after panic on line 21"}
	if strings.Join(hits, "\n") != strings.Join(want, "\n") {
		t.Errorf("hits:\n%s\nwant:\n%s", strings.Join(hits, "\n"), strings.Join(want, "\n"))
	}
}

func TestCheckFileAcceptsReachableCode(t *testing.T) {
	src := `package x

import "testing"

func TestX(t *testing.T) {
	if err := f(); err != nil {
		t.Fatalf("f: %v", err)
	}
	t.Errorf("reachable")
	if bad {
		t.Fatal("x")
	} else {
		t.Log("reachable")
	}
	goto end
	t.Fatal("unreachable by goto, but its label below is reachable")
end:
	t.Log("reachable")
}
`
	hits, err := checkFile("x_test.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 0 {
		t.Errorf("false alarms: %v", hits)
	}
}
