package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/statuspage"
)

// hostile is stored text that a terminal would act on: a screen clear,
// a colour, a window title, a newline and a bidirectional override.
const hostile = "\x1b[2J\x1b[31mevil\x1b]0;pwned\x07\nline\u202e"

// The tables quote stored text that is not plain printable, so that
// batonctl never writes a terminal escape or a newline from the store
// raw, whatever a store returns; printable text is shown as it is.
func TestTablesQuoteStoredText(t *testing.T) {
	var out bytes.Buffer
	s := &session{stdout: &out, stderr: &out, tenant: tenant, app: "billing", kind: "redis"}
	l := backend.Lease{Key: backend.AppKey(tenant, "billing", "lock", "k"), Owner: hostile + "#00aa", Token: 7, TTL: time.Second}
	if err := s.printLocks([]backend.LeaseInfo{{Lease: l, Waiters: []string{"plain-waiter", hostile}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.printMembers([]statuspage.Member{{ID: hostile, Owner: hostile + "#00aa"}}); err != nil {
		t.Fatal(err)
	}
	s.printHolder(l.Key, l)
	s.printHolder(s.roleKey(), l)
	got := out.String()
	if strings.ContainsAny(got, "\x1b\x07\u202e") || strings.Count(got, "\n") != 6 {
		t.Errorf("the tables wrote stored text raw:\n%q", got)
	}
	if !strings.Contains(got, `\x1b[2J`) || !strings.Contains(got, "plain-waiter") {
		t.Errorf("the tables do not show the stored text quoted:\n%s", got)
	}
}
