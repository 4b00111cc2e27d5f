package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/statuspage"
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

// The JSON output describes the master, the members and the locks in
// the shapes of the status page's /status (statuspage.Master, Member and
// Lock, made by the same functions), so that a script reads both alike.

// servicePrefix is what precedes the name of each of the service's keys:
// {tenant:app}:.
func (s *session) servicePrefix() string { return backend.AppKey(s.tenant, s.app) + ":" }

// lockOut describes a held lease as /status does.
func (s *session) lockOut(l backend.LeaseInfo) statuspage.Lock {
	return statuspage.LockOf(s.store, l, s.servicePrefix(), time.Now())
}

// masterOut describes the role lease as /status does.
func (s *session) masterOut(l backend.Lease) *statuspage.Master {
	return statuspage.MasterOf(s.store, l, time.Now())
}

// storeKey is the key in which the store keeps the lease on key (the
// Redis key with its prefix, the Consul KV path), or key itself when the
// store does not say.
func (s *session) storeKey(key string) string {
	if k := statuspage.StoreKey(s.store, key); k != "" {
		return k
	}
	return key
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
