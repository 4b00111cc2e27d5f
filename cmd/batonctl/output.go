package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/baton-go/baton/backend"
)

// instanceOf returns the instance ID in an owner string: a role owner is
// the instance ID, '#' and a per-process nonce.
func instanceOf(owner string) string {
	if i := strings.LastIndexByte(owner, '#'); i > 0 {
		return owner[:i]
	}
	return owner
}

// text is stored text (a key, an owner, an instance ID, a waiter) as a
// table or a message shows it: as it is when every character is
// printable, else quoted with its control characters escaped
// (backend.Printable), so that a terminal escape sequence or a newline
// read from the store is shown, never acted on by the terminal. JSON
// output escapes them by itself.
func text(s string) string { return backend.Printable(s) }

// dur formats a lease's or member's duration for a table, to the
// millisecond.
func dur(d time.Duration) string {
	return d.Round(time.Millisecond).String()
}

// writeJSON writes v as indented JSON and a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table returns a tabwriter for aligned columns; flush it when done.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// leaseJSON is a lease in JSON output.
type leaseJSON struct {
	Key   string `json:"key"`
	ID    string `json:"id"`
	Owner string `json:"owner"`
	Token uint64 `json:"token"`
	// TTLMillis is what the lease has left (Consul: what it was given).
	TTLMillis int64    `json:"ttl_ms"`
	Waiters   []string `json:"waiters,omitempty"`
}

func leaseOut(l backend.Lease) leaseJSON {
	return leaseJSON{Key: l.Key, ID: instanceOf(l.Owner), Owner: l.Owner, Token: l.Token, TTLMillis: l.TTL.Milliseconds()}
}

// masterJSON is the master in JSON output: the role lease, whose token
// is the master's epoch.
type masterJSON struct {
	ID        string `json:"id"`
	Owner     string `json:"owner"`
	Epoch     uint64 `json:"epoch"`
	TTLMillis int64  `json:"ttl_ms"`
	Key       string `json:"key"`
}

func masterOut(l backend.Lease) *masterJSON {
	return &masterJSON{ID: instanceOf(l.Owner), Owner: l.Owner, Epoch: l.Token, TTLMillis: l.TTL.Milliseconds(), Key: l.Key}
}

// ttlNote says how to read a lease's TTL on the store: Consul reports
// the TTL a lease was given, not what is left of it.
func (s *session) ttlNote() string {
	if s.kind == "consul" {
		return "given"
	}
	return "left"
}

func fprintf(w io.Writer, format string, args ...any) {
	fmt.Fprintf(w, format, args...)
}
