package springredis

import (
	"context"
	"fmt"

	"github.com/baton-go/baton/backend"
)

var _ backend.Breaker = (*Store)(nil)

var breakScript = script("break")

// Break implements backend.Breaker: DEL of the shared key and baton's
// record beside it, whoever holds the key, a Java instance included, with
// the fencing counter moved past the broken token and the server's clock
// and the release announced to baton's watchers. A Java holder is not
// told either: it deletes the key when its method returns, as its release
// always does, whoever holds the key then (see the package doc).
func (s *Store) Break(ctx context.Context, key string) (backend.Lease, error) {
	if err := s.begin(ctx, "break", key, nil); err != nil {
		return backend.Lease{}, err
	}
	sh := s.shared(key)
	channel, released, _ := s.baton.Notices(key)
	res, err := breakScript.Run(ctx, s.rdb, s.keys(sh), channel, released).Slice()
	if err != nil {
		return backend.Lease{}, s.transport("break", key, sh, ctx, err)
	}
	switch status(res) {
	case "ok":
		return s.holder(key, sh, res[1:])
	case "free":
		return backend.Lease{}, fmt.Errorf("springredis: break %q (%s): %w", key, sh.redis, backend.ErrNotFound)
	case "corrupt":
		return backend.Lease{}, fmt.Errorf("springredis: break %q: %w: %s", key, backend.ErrCorrupt, backend.Printable(fmt.Sprint(res[1])))
	}
	return backend.Lease{}, s.unexpected("break", key, sh, res)
}
