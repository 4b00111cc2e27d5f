package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/statuspage"
)

// releaseJSON is release's JSON output, the leases in /status's shape.
type releaseJSON struct {
	Key      string `json:"key"`
	StoreKey string `json:"store_key"`
	// Released is the lease that was ended.
	Released statuspage.Lock `json:"released"`
	// Now is the lease on the key right after: the waiter first in line
	// that the key was handed to, or another owner that took it at once;
	// null when the key was free.
	Now *statuspage.Lock `json:"now"`
}

// release ends the lease on a key whoever holds it (backend.Breaker):
// only with --force, and after a confirmation unless --yes. It ends the
// grant it showed and nothing else: if the key changed hands since, it
// ends nothing and says who holds the key now (exit 4).
func release(ctx context.Context, s *session, args []string) error {
	key := s.key(args[0])
	if err := backend.ValidateKey(key); err != nil {
		return usagef("release: %v", err)
	}
	cctx, cancel := s.call(ctx)
	l, err := s.store.Get(cctx, key)
	cancel()
	if errors.Is(err, backend.ErrNotFound) {
		return nof("%s is free: nothing to release", key)
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", key, err)
	}
	held := fmt.Sprintf("held by %s (owner %s, %s, lease %s %s)", text(instanceOf(l.Owner)), text(l.Owner), tokenText(l.Token), dur(l.TTL), s.ttlNote())
	b, ok := s.store.(backend.Breaker)
	if !ok {
		return fmt.Errorf("%s is %s, but the %s store cannot end another owner's lease; wait for it to end or have its holder release it", key, held, s.kind)
	}
	if !s.o.force {
		fenced := ""
		if l.Token != 0 {
			fenced = fmt.Sprintf(" Tokens granted after it are above %d, so resources that check fencing tokens turn the old holder away.", l.Token)
		}
		return nof("refusing to release %s (%s), %s, without --force: its holder may still be running, and a forced release lets another take the key at once.%s Run again with --force", key, s.storeWhere(key), held, fenced)
	}
	if !s.o.yes {
		if err := s.confirm(fmt.Sprintf("Release %s, %s? Its holder is not told and may still be running. Type yes to release: ", key, held), "released"); err != nil {
			return err
		}
	}
	broken, err := s.breakShown(ctx, b, key, l)
	if err != nil {
		return err
	}
	// Where the key went: free, or handed to the waiter first in line.
	cctx, cancel = s.call(ctx)
	now, err := s.store.Get(cctx, key)
	cancel()
	var next *statuspage.Lock
	switch {
	case err == nil:
		j := s.lockOut(backend.LeaseInfo{Lease: now})
		next = &j
	case !errors.Is(err, backend.ErrNotFound):
		fprintf(s.stderr, "batonctl: released %s, but could not read it again: %v\n", key, err)
	}
	if s.json() {
		return writeJSON(s.stdout, releaseJSON{Key: key, StoreKey: s.storeKey(key), Released: s.lockOut(backend.LeaseInfo{Lease: broken}), Now: next})
	}
	fprintf(s.stdout, "released %s (%s): it was held by %s (owner %s, %s)", key, s.storeWhere(key), text(instanceOf(broken.Owner)), text(broken.Owner), tokenText(broken.Token))
	if broken.Token != 0 {
		fprintf(s.stdout, "; every later holder's token is above %d", broken.Token)
	}
	fprintf(s.stdout, "\n")
	if next != nil {
		fprintf(s.stdout, "%s is now held by %s (owner %s, %s)\n", key, text(next.Holder), text(next.Owner), tokenText(next.Token))
	}
	return nil
}

// breakShown ends shown, the lease on key that release showed, and
// nothing else: a key freed since is a "no" (exit 3), a key that changed
// hands since is a changedError (exit 4) naming its holder now.
func (s *session) breakShown(ctx context.Context, b backend.Breaker, key string, shown backend.Lease) (backend.Lease, error) {
	cctx, cancel := s.call(ctx)
	broken, err := b.Break(cctx, key, shown.Owner, shown.Token)
	cancel()
	var ce *backend.ChangedError
	switch {
	case errors.Is(err, backend.ErrNotFound):
		return broken, nof("%s was freed before the release: nothing to release", key)
	case errors.As(err, &ce):
		h := ce.Holder
		return broken, changedf("%s changed hands after it was shown: it was held by %s (owner %s, %s) and is now held by %s (owner %s, %s, lease %s %s); nothing released. Run release again to see who holds it now",
			key, instanceOf(shown.Owner), shown.Owner, tokenText(shown.Token), instanceOf(h.Owner), h.Owner, tokenText(h.Token), dur(h.TTL), s.ttlNote())
	case err != nil:
		return broken, fmt.Errorf("releasing %s: %w", key, err)
	}
	return broken, nil
}

// confirm asks question on stderr and reads the answer from stdin; only
// "yes", as the question asks, confirms (any other answer, "y" too,
// does nothing and says so: "nothing <done>").
func (s *session) confirm(question, done string) error {
	fprintf(s.stderr, "%s", question)
	answer, err := bufio.NewReader(s.stdin).ReadString('\n')
	if !isTerminal(s.stdin) {
		// A terminal echoed the answer and its newline; a pipe did not.
		fprintf(s.stderr, "%s\n", strings.TrimSpace(answer))
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the confirmation: %w", err)
	}
	switch a := strings.TrimSpace(answer); {
	case a == "yes":
		return nil
	case a == "" && errors.Is(err, io.EOF):
		return nof("no confirmation on stdin: nothing %s (pass --yes to go on without asking)", done)
	case a == "":
		return nof("not confirmed: nothing %s", done)
	default:
		return nof("not confirmed (the answer was %s, not yes): nothing %s", strconv.Quote(a), done)
	}
}

// isTerminal reports whether r is a terminal, which echoes what is typed.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// tokenText describes a fencing token; 0 is a lease without one (the Java
// side's, on the Spring layout).
func tokenText(token uint64) string {
	if token == 0 {
		return "no fencing token"
	}
	return fmt.Sprintf("token %d", token)
}
