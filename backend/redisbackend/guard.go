package redisbackend

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

// declareScript writes a restart guard marker as an operator's
// declaration (DeclareIntact).
var declareScript = redis.NewScript(readLua("declare"))

// TenantIntactKey returns the Redis key that records since when all of
// the baton data of key's tenant on the server is known whole (see
// Restart guard): "<prefix>:{T:}:intact" for a key whose hash tag is
// {T:app}, as every key of role, synclock and schedlock has (no app is
// named ""), and "<prefix>:intact" for any other key. A Cluster has none
// that the scripts read: there each tag's marker (IntactKey) stands
// alone. Keyed by tenant, the marker stays inside the keys of
// TenantACLRules, so that no tenant of a shared server can write what
// another tenant's grants trust.
func (s *Store) TenantIntactKey(key string) string {
	tag := backend.HashTag(key)
	if i := strings.IndexByte(tag, ':'); i > 0 {
		return s.prefix + ":" + tag[:i+1] + "}" + intactSuffix
	}
	return s.prefix + intactSuffix
}

// DeclareIntact declares the baton data of the services of keys whole on
// the server, for a server that an operator knows holds no live lease of
// them (a new server, or one whose every holder has stopped): their
// grants then skip the restart guard's wait until the server restarts or
// its data is flushed. batonctl init calls it with the service's
// backend.AppKey(tenant, app). On a standalone or Sentinel-managed server
// it writes the marker of each key's tenant (TenantIntactKey), which
// covers every service of the tenant; on a Cluster, where a script reads
// only its own slot, the marker of each key's hash tag (IntactKey). A
// marker so written holds 0 (whole since ever) and the ID of the server's
// run (INFO server's run_id), which a restart changes.
func (s *Store) DeclareIntact(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return fmt.Errorf("redisbackend: declare intact: %w: no key: name the services, as backend.AppKey(tenant, app)", backend.ErrInvalidArgument)
	}
	for _, key := range keys {
		if err := validKey("declare intact", key); err != nil {
			return err
		}
		keys := s.leaseKeys(key)
		m := keys[len(keys)-1]
		if m == keys[0] {
			return fmt.Errorf("redisbackend: declare intact: %w: key %q has no hash tag {tenant:app}, and on a Cluster only a tag's marker is read", backend.ErrInvalidArgument, key)
		}
		if err := declareScript.Run(ctx, s.rdb, []string{m}).Err(); err != nil {
			return s.transportOn("declare intact", key, m, ctx, err)
		}
	}
	return nil
}
