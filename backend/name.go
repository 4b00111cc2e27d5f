package backend

import (
	"path"
	"reflect"
)

// Namer is implemented by a store that says what kind of store it talks
// to, for StoreName: baton's stores answer "redis", "sentinel", "cluster"
// (redisbackend, by the client it was given), "spring" (springredis),
// "consul" (consulbackend) and "memory" (membackend). A type that embeds
// one of them, such as config.RedisStore, answers as the store it embeds.
type Namer interface {
	// StoreName names the kind of store, in lower case; "" leaves the
	// choice to StoreName's fallback.
	StoreName() string
}

// StoreName names the store s for logs (the "backend" attribute of the
// role, synclock and schedlock log lines): its own name when it is a
// Namer, else the last element of the package path of its type (a
// wrapper's, such as "faulty"), or "" for nil.
func StoreName(s Store) string {
	if s == nil {
		return ""
	}
	if n, ok := s.(Namer); ok {
		if name := n.StoreName(); name != "" {
			return name
		}
	}
	t := reflect.TypeOf(s)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return path.Base(t.PkgPath())
}
