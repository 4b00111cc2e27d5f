package snippets

// The packages of Imports (the list there and this one name the same
// packages), and those the documents' whole programs import besides, so
// that this module requires what they are in and go list -export finds
// them.
import (
	_ "github.com/alicebob/miniredis/v2"
	_ "github.com/google/uuid"

	_ "github.com/go-co-op/gocron/v2"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/go-redis/v9"

	_ "github.com/baton-go/baton/backend"
	_ "github.com/baton-go/baton/backend/consulbackend"
	_ "github.com/baton-go/baton/backend/membackend"
	_ "github.com/baton-go/baton/backend/redisbackend"
	_ "github.com/baton-go/baton/backend/springredis"
	_ "github.com/baton-go/baton/config"
	_ "github.com/baton-go/baton/config/consulconfig"
	_ "github.com/baton-go/baton/instanceid"
	_ "github.com/baton-go/baton/metrics"
	_ "github.com/baton-go/baton/role"
	_ "github.com/baton-go/baton/schedlock"
	_ "github.com/baton-go/baton/statuspage"
	_ "github.com/baton-go/baton/synclock"
)
