package redisbackend_test

import (
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
)

func listed(t *testing.T, s *redisbackend.Store, prefix string) []string {
	t.Helper()
	ls, err := s.Leases(ctxT(t), prefix)
	if err != nil {
		t.Fatalf("Leases(%q): %v", prefix, err)
	}
	var keys []string
	for _, l := range ls {
		keys = append(keys, l.Key)
	}
	return keys
}

// Leases finds keys with and without a hash tag (stored as "<prefix>:{key}"),
// lists a bare tag without its braces unless the prefix asks for them,
// takes glob characters in the prefix literally, ignores keys of other
// types under the store's prefix and reports foreign strings as corrupt.
func TestLeasesKeyShapes(t *testing.T) {
	rdb := server.Client(t)
	prefix := "insp" + strings.ToLower(rand.Text()[:8])
	s := newStore(t, rdb, redisbackend.WithPrefix(prefix))
	ctx := ctxT(t)
	for _, key := range []string{"plain:a", "plain:b", "{plain:c}", "{t}:x", "plainer", "glob*[1]", "globX"} {
		if _, err := s.Acquire(ctx, key, "me", time.Minute, 0); err != nil {
			t.Fatalf("Acquire(%q): %v", key, err)
		}
	}
	for _, tt := range []struct {
		prefix string
		want   []string
	}{
		{"plain:", []string{"plain:a", "plain:b", "plain:c"}},
		{"{plain:", []string{"{plain:a}", "{plain:b}", "{plain:c}"}},
		{"{t}", []string{"{t}:x"}},
		{"glob*", []string{"glob*[1]"}},
		{"", []string{"glob*[1]", "globX", "plain:a", "plain:b", "plain:c", "plainer", "{t}:x"}},
	} {
		if got := listed(t, s, tt.prefix); !slices.Equal(got, tt.want) {
			t.Errorf("Leases(%q) lists %q; want %q", tt.prefix, got, tt.want)
		}
	}
	for _, key := range listed(t, s, "{plain:") {
		if _, err := s.Get(ctx, key); err != nil {
			t.Errorf("Get(%q) of a listed key: %v", key, err)
		}
	}

	if err := rdb.HSet(ctx, prefix+":{hash}", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, s, "hash"); len(got) != 0 {
		t.Errorf("Leases lists a hash under the prefix: %q", got)
	}
	if err := rdb.Set(ctx, prefix+":{junk}", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Leases(ctx, "junk"); !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), "junk") {
		t.Errorf("Leases over a foreign string: err = %v; want ErrCorrupt naming the key", err)
	}
}
