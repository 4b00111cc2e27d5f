package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/baton-go/baton/backend"
)

// releaseJSON is release's JSON output.
type releaseJSON struct {
	Key      string    `json:"key"`
	Released leaseJSON `json:"released"`
}

// release ends the lease on a key whoever holds it (backend.Breaker):
// only with --force, and after a confirmation unless --yes.
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
	held := fmt.Sprintf("held by %s (owner %s, token %d, lease %s %s)", instanceOf(l.Owner), l.Owner, l.Token, dur(l.TTL), s.ttlNote())
	b, ok := s.store.(backend.Breaker)
	if !ok {
		return fmt.Errorf("%s is %s, but the %s store cannot end another owner's lease; wait for it to end or have its holder release it", key, held, s.kind)
	}
	if !s.o.force {
		return nof("refusing to release %s, %s, without --force: its holder may still be running, and a forced release lets another take the key at once. "+
			"Tokens granted after it are above %d, so resources that check fencing tokens turn the old holder away. Run again with --force", key, held, l.Token)
	}
	if !s.o.yes {
		if err := s.confirm(fmt.Sprintf("Release %s, %s? Its holder is not told and may still be running. Type yes to release: ", key, held)); err != nil {
			return err
		}
	}
	cctx, cancel = s.call(ctx)
	broken, err := b.Break(cctx, key)
	cancel()
	if errors.Is(err, backend.ErrNotFound) {
		return nof("%s was freed before the release: nothing to release", key)
	}
	if err != nil {
		return fmt.Errorf("releasing %s: %w", key, err)
	}
	if s.json() {
		return writeJSON(s.stdout, releaseJSON{Key: key, Released: leaseOut(broken)})
	}
	fprintf(s.stdout, "released %s: it was held by %s (owner %s, token %d); every later holder's token is above %d\n",
		key, instanceOf(broken.Owner), broken.Owner, broken.Token, broken.Token)
	return nil
}

// confirm asks question on stderr and reads the answer from stdin; only
// "yes" (or "y") confirms.
func (s *session) confirm(question string) error {
	fprintf(s.stderr, "%s", question)
	answer, err := bufio.NewReader(s.stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the confirmation: %w", err)
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "yes", "y":
		return nil
	case "":
		if errors.Is(err, io.EOF) {
			fprintf(s.stderr, "\n")
			return nof("no confirmation on stdin: nothing released (pass --yes to release without asking)")
		}
	}
	return nof("not confirmed: nothing released")
}
