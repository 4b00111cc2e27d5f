package redisbackend

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/baton-go/baton/backend"
)

// status is the first element of a script's array reply: what happened.
// The scripts (scripts.go) write these words; parseReply reads them.
type status string

const (
	statusOK         status = "ok"          // owner token pttl: the caller holds the key (or a bare token: it was granted, renewed, released)
	statusHeld       status = "held"        // owner token pttl [next]: another lease is on the key
	statusQueued     status = "queued"      // next: the key is free but kept for next, first in line
	statusFree       status = "free"        // no lease is on the key
	statusRecovering status = "recovering"  // ms-left: the restart guard refuses the grant
	statusCorrupt    status = "corrupt"     // description: the key holds data baton did not write
	statusFloorAhead status = "floor-ahead" // description: the floor is beyond any token a grant can make (backend.ErrFloorAhead)
	statusJoined     status = "joined"      // token: the caller's lease was released, handed over, and next joined the line (ReleaseAndJoin)
)

type reply struct {
	status status
	lease  backend.Lease
	next   string // the waiter first in line, for held (AcquireQueued) and queued
	detail string
}

func (r reply) unexpected(op, key string) error {
	if r.status == statusFloorAhead {
		return fmt.Errorf("redisbackend: %s %q: %w: %s; forget the floor", op, key, backend.ErrFloorAhead, r.detail)
	}
	if r.status == statusCorrupt {
		remedy := "; delete the key or use another prefix"
		if strings.HasSuffix(r.detail, "delete it") || strings.HasSuffix(r.detail, "guard once") {
			remedy = "" // the script said what to do
		}
		return fmt.Errorf("redisbackend: %s %q: %w: %s%s", op, key, backend.ErrCorrupt, backend.Printable(r.detail), remedy)
	}
	return fmt.Errorf("redisbackend: %s %q: %w: script replied %q", op, key, backend.ErrCorrupt, r.status)
}

// millis converts a count of milliseconds read from Redis to a duration.
// It reports false for a negative count and for one too large for a
// time.Duration, which the multiplication would silently wrap to a
// negative (or a small) value.
func millis(ms int64) (time.Duration, bool) {
	if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// parsePositiveMillis reads a positive count of milliseconds that fits a
// time.Duration, as the scripts write TTLs and times left.
func parsePositiveMillis(s string) (time.Duration, bool) {
	ms, err := strconv.ParseInt(s, 10, 64)
	d, fits := millis(ms)
	return d, err == nil && ms > 0 && fits
}

// parseReply turns a script's reply into a lease, checking every field so
// that foreign data gives ErrCorrupt instead of a panic or a zero token. A
// reply that is a string alone is the token of the lease that was asked
// for (asked: key, owner and ttl), granted, renewed or released.
func parseReply(op, key string, res any, asked backend.Lease) (reply, error) {
	r, err := readReply(key, res, asked)
	if err != nil {
		return reply{}, fmt.Errorf("redisbackend: %s %q: %w", op, key, err)
	}
	return r, nil
}

// readReply is parseReply, its errors without the call: it reads the
// reply by its status word, each kind of reply in a step of its own.
func readReply(key string, res any, asked backend.Lease) (reply, error) {
	if tok, ok := res.(string); ok {
		return grantedReply(tok, asked)
	}
	arr, _ := res.([]any)
	if len(arr) == 0 {
		return reply{}, malformed("unexpected script reply %v", res)
	}
	word, _ := arr[0].(string)
	switch st := status(word); st {
	case statusFree:
		return reply{status: st}, nil
	case statusCorrupt, statusFloorAhead:
		return detailReply(st, arr), nil
	case statusRecovering:
		return recoveringReply(key, arr)
	case statusQueued:
		return queuedReply(key, arr)
	case statusOK, statusHeld:
		return leaseReply(st, key, arr)
	case statusJoined:
		return joinedReply(arr, asked)
	}
	return reply{}, malformed("unknown script reply %v", arr)
}

// malformed is the error of a reply that no script of baton writes.
func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", backend.ErrCorrupt, backend.Printable(fmt.Sprintf(format, args...)))
}

// grantedReply reads a reply that is a token alone: asked was granted,
// renewed or released with it.
func grantedReply(tok string, asked backend.Lease) (reply, error) {
	token, ok := backend.ParseToken(tok)
	if !ok {
		return reply{}, malformed("lease token %q is not a positive integer (at most %d)", tok, uint64(backend.MaxToken))
	}
	asked.Token = token
	return reply{status: statusOK, lease: asked}, nil
}

// detailReply reads {status, description}: the script says what is wrong.
func detailReply(st status, arr []any) reply {
	r := reply{status: st}
	if len(arr) > 1 {
		r.detail, _ = arr[1].(string)
	}
	return r
}

// recoveringReply reads {'recovering', ms left}: the restart guard
// refused the grant for that long.
func recoveringReply(key string, arr []any) (reply, error) {
	if len(arr) < 2 {
		return reply{}, malformed("short script reply %v", arr)
	}
	left, _ := arr[1].(string)
	d, ok := parsePositiveMillis(left)
	if !ok {
		return reply{}, malformed("recovering reply with time left %v", arr[1])
	}
	return reply{status: statusRecovering, lease: backend.Lease{Key: key, TTL: d}}, nil
}

// queuedReply reads {'queued', next}: the key is free but kept for next.
func queuedReply(key string, arr []any) (reply, error) {
	if len(arr) < 2 {
		return reply{}, malformed("short script reply %v", arr)
	}
	next, _ := arr[1].(string)
	if next == "" {
		return reply{}, malformed("queued reply names no waiter")
	}
	if err := backend.CheckStoredName("waiter", "the line of "+key, next); err != nil {
		return reply{}, err
	}
	return reply{status: statusQueued, next: next, lease: backend.Lease{Key: key}}, nil
}

// leaseReply reads {'ok' or 'held', owner, token, pttl[, next]}: the lease
// on the key, the caller's or another's, and the waiter first in line.
func leaseReply(st status, key string, arr []any) (reply, error) {
	if len(arr) < 4 {
		return reply{}, malformed("short script reply %v", arr)
	}
	owner, _ := arr[1].(string)
	tok, _ := arr[2].(string)
	ttl, ok := arr[3].(int64)
	if !ok {
		return reply{}, malformed("lease TTL %v is not an integer", arr[3])
	}
	if owner == "" {
		return reply{}, malformed("%s reply names no owner", st)
	}
	token, ok := backend.ParseToken(tok)
	if !ok {
		return reply{}, malformed("lease token %q is not a positive integer (at most %d)", tok, uint64(backend.MaxToken))
	}
	if ttl < 0 {
		return reply{}, malformed("lease key has no expiry (PTTL %d); baton never writes a lease without one", ttl)
	}
	if _, fits := millis(max(ttl, -ttl)); !fits {
		return reply{}, malformed("lease TTL %d ms is out of range", ttl)
	}
	r := reply{status: st, lease: backend.Lease{Key: key, Owner: owner, Token: token, TTL: time.Duration(ttl) * time.Millisecond}}
	if len(arr) > 4 {
		r.next, _ = arr[4].(string)
	}
	if err := r.checkNames(key); err != nil {
		return reply{}, err
	}
	return r, nil
}

// checkNames checks the names a reply read from the store, the holder and
// the waiter first in line, by the rules of what baton writes
// (backend.CheckStoredName): a name with a control character, such as a
// terminal escape or a newline, is ErrCorrupt, never returned.
func (r reply) checkNames(key string) error {
	if err := backend.CheckStoredName("owner", "lease "+key, r.lease.Owner); err != nil {
		return err
	}
	if r.next != "" {
		return backend.CheckStoredName("waiter", "the line of "+key, r.next)
	}
	return nil
}

// asked is the lease a request for key by owner for ms milliseconds
// would get, the token aside; parseReply completes it from a short reply.
func asked(key, owner string, ms int64) backend.Lease {
	return backend.Lease{Key: key, Owner: owner, TTL: time.Duration(ms) * time.Millisecond}
}

// succeeded reports whether a script's reply says it did what was asked.
func succeeded(res any) bool {
	if _, ok := res.(string); ok {
		return true
	}
	arr, _ := res.([]any)
	return len(arr) > 0 && arr[0] == string(statusOK)
}

// joinedReply reads {'joined', token}: asked was released with token,
// handed over, and the next waiter joined the line.
func joinedReply(arr []any, asked backend.Lease) (reply, error) {
	if len(arr) != 2 {
		return reply{}, malformed("unexpected script reply %v", arr)
	}
	tok, _ := arr[1].(string)
	r, err := grantedReply(tok, asked)
	r.status = statusJoined
	return r, err
}
