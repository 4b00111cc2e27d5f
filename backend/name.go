package backend

import (
	"path"
	"reflect"
)

// StoreName names the adapter of s for logs and metrics: the last element
// of the package path of its type ("redisbackend", "consulbackend",
// "membackend", "springredis"), or "" for nil.
func StoreName(s Store) string {
	if s == nil {
		return ""
	}
	t := reflect.TypeOf(s)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return path.Base(t.PkgPath())
}
