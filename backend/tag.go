package backend

import (
	"fmt"
	"strings"
	"unicode"
)

// HashTag returns key's hash tag with its braces, "{acme:billing}" for
// AppKey("acme", "billing", ...): the first "{...}" of key that is not
// empty, as Redis Cluster finds it; "" if key has none. The stores scope
// what belongs to one service (the restart guard's markers) by it.
func HashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return "" // no tag, or an empty one: Redis hashes the whole key
	}
	return key[i : i+j+2]
}

// ValidateTagName checks a tenant or app name (what says which) that goes
// into a {tenant:app} hash tag and into the ACL rules made from it: not
// empty, no ':' (the tag's separator), no braces, no spaces or control
// characters, as instanceid requires of an ID's parts. The error wraps
// ErrInvalidArgument.
func ValidateTagName(what, name string) error {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool {
		return r == ':' || r == '{' || r == '}' || r == ' ' || !unicode.IsPrint(r)
	}) {
		return fmt.Errorf("%w: %s %q must be non-empty, without ':', braces, spaces or control characters", ErrInvalidArgument, what, name)
	}
	return nil
}
