package main

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/hashicorp/consul/api"
	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/all/chaos"
)

// documented are the errors baton's API documents for the calls a node
// makes: its sentinels (and the typed errors that match them) and the
// caller's context ending.
var documented = []error{
	synclock.ErrLocked, synclock.ErrLeaseExpired,
	schedlock.ErrSkipped, schedlock.ErrLost, schedlock.ErrUnavailable,
	backend.ErrHeld, backend.ErrNotHeld,
	context.Canceled, context.DeadlineExceeded,
}

// classify says whether err is one of the documented errors, or the
// store's own error reaching the caller as the docs say it may (the
// connection failed or timed out, or the server answered with an error
// while it restarts or fails over). Anything else — backend.ErrCorrupt
// above all — is undocumented: a bug.
func classify(err error) string {
	if errors.Is(err, backend.ErrCorrupt) || errors.Is(err, backend.ErrInvalidArgument) {
		return chaos.ClassUndocumented
	}
	var le *ledgerError
	if errors.As(err, &le) {
		// The ledger is the test's resource, not baton: it is never
		// faulted, so an error there is the harness's and is reported
		// as undocumented for a person to look at.
		return chaos.ClassUndocumented
	}
	for _, d := range documented {
		if errors.Is(err, d) {
			return chaos.ClassDocumented
		}
	}
	if storeError(err) {
		return chaos.ClassDocumented
	}
	return chaos.ClassUndocumented
}

// storeError reports whether err is a failure of the connection to the
// store, an error reply of a Redis that is restarting, loading or failing
// over, or one of a Consul agent that has no leader for the moment (after
// a restart, before it elected itself).
func storeError(err error) bool {
	var ne net.Error
	var re redis.Error
	var se api.StatusError
	switch {
	case errors.As(err, &se) && se.Code >= 500:
		return true
	case consulLeaderless(err.Error()):
		return true
	case errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, backend.ErrClosed):
		return true
	case errors.As(err, &re):
		msg := re.Error()
		for _, p := range []string{"LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS", "UNBLOCKED"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
	}
	return false
}

// consulLeaderless reports whether msg is a Consul agent's refusal while
// it has no Raft leader, or while it shuts down for a restart, or a 5xx
// answer. Some calls (transactions, session renewals) report it only as
// text.
func consulLeaderless(msg string) bool {
	if _, code, ok := strings.Cut(msg, "Unexpected response code: 5"); ok && len(code) >= 2 && code[0] >= '0' && code[0] <= '9' && code[1] >= '0' && code[1] <= '9' {
		// A 5xx that the client reports as text only (session renewals
		// do): the agent failed the request, as while it restarts.
		return true
	}
	for _, p := range []string{"No cluster leader", "leadership lost while committing log", "node is not the leader", "raft is already shutdown"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// ledgerError marks an error of the ledger, not of baton.
type ledgerError struct{ err error }

func (e *ledgerError) Error() string { return "ledger: " + e.err.Error() }
func (e *ledgerError) Unwrap() error { return e.err }
