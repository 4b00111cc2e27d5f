package springredis

import (
	"context"
	"fmt"

	"github.com/baton-go/baton/backend"
)

var _ backend.Breaker = (*Store)(nil)

var breakScript = fencedScript("break")

// breakAttempts bounds Break's rounds when the key or baton's record of
// it changes between its read and its compare-and-break.
const breakAttempts = 3

// Break implements backend.Breaker: DEL of the shared key and baton's
// record beside it, whoever holds the key, a Java instance included, if
// it is still the grant named, with the fencing counter moved past the
// broken token and the server's clock and the release announced to
// baton's watchers. A Java holder is not told either: it deletes the key
// when its method returns, as its release always does, whoever holds the
// key then (see the package doc).
//
// Break reads the key and then breaks it in a script that ends it only if
// the key's value and baton's record are still what it read. A Java
// holder's grant has no token: two grants in a row to one Java instance
// (the same value) are one grant to Break.
func (s *Store) Break(ctx context.Context, key, owner string, token uint64) (backend.Lease, error) {
	if err := s.begin(ctx, "break", key, &owner); err != nil {
		return backend.Lease{}, err
	}
	sh := s.shared(key)
	res, err := getScript.Run(ctx, s.rdb, s.keys(sh)).Slice()
	if err != nil {
		return backend.Lease{}, s.transport("break", key, sh, ctx, err)
	}
	channel, released, _ := s.baton.Notices(key)
	for range breakAttempts {
		if err := s.breakable(key, sh, owner, token, res); err != nil {
			return backend.Lease{}, err
		}
		// breakable checked res: {'ok' or 'changed', value, pttl, record}.
		res, err = breakScript.Run(ctx, s.rdb, s.keys(sh), channel, released, res[1], res[3]).Slice()
		if err != nil {
			return backend.Lease{}, s.transport("break", key, sh, ctx, err)
		}
		if status(res) == "ok" {
			return s.holder(key, sh, res[1:])
		}
	}
	return backend.Lease{}, fmt.Errorf("springredis: break %q (%s): the key changed under %d attempts in a row; try again", key, sh.redis, breakAttempts)
}

// breakable reports (nil) whether res, the reply of the get script or of
// the break script that found the key changed, shows the grant to owner
// with token on key, or why not.
func (s *Store) breakable(key string, sh shared, owner string, token uint64, res []any) error {
	switch status(res) {
	case "ok", "changed":
	case "free":
		return fmt.Errorf("springredis: break %q (%s): %w", key, sh.redis, backend.ErrNotFound)
	case "corrupt":
		return fmt.Errorf("springredis: break %q: %w: %s", key, backend.ErrCorrupt, backend.Printable(fmt.Sprint(res[1])))
	default:
		return s.unexpected("break", key, sh, res)
	}
	l, err := s.holder(key, sh, res[1:])
	switch {
	case err != nil:
		return err
	case l.Owner == "":
		return fmt.Errorf("springredis: break %q (%s): %w", key, sh.redis, backend.ErrNotFound)
	case l.Owner != owner || l.Token != token:
		return fmt.Errorf("springredis: break: %w", &backend.ChangedError{Key: key, Owner: owner, Token: token, Holder: l})
	}
	if _, ok := res[3].(string); !ok {
		return s.unexpected("break", key, sh, res)
	}
	return nil
}
