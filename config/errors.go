package config

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/baton-go/baton/backend"
)

// ErrInvalid is wrapped by every error that reports bad configuration
// content: an unknown key, a value of the wrong type or out of range, a
// rule between keys, a file that does not parse, an unknown format, a
// malformed duration. Errors reading a file (it does not exist, it cannot
// be read) do not wrap it; they wrap the underlying error instead.
var ErrInvalid = errors.New("config: invalid configuration")

// ErrUnreachable is wrapped by the error of a store that did not answer
// when Config.RedisStore checked it (redis.fail-fast) or RedisStore.Ping
// was called; the message names the address and the client's error.
var ErrUnreachable = errors.New("config: store unreachable")

// unreachableError reports a store that did not answer a ping.
type unreachableError struct {
	where, key string
	err        error
	tls        bool // the client spoke TLS
}

func (e *unreachableError) Error() string {
	return fmt.Sprintf("config: store unreachable at %s (%s): %v%s", e.where, e.key, e.err, tlsHint(e.err, e.tls))
}

// authError reports a store that answered but refused the credentials.
// It wraps backend.ErrAuth and the client's error, not ErrUnreachable:
// retrying does not help.
type authError struct {
	where, keys string
	err         error
}

func (e *authError) Error() string {
	return fmt.Sprintf("config: authentication failed at %s: the server refused the credentials; check %s: %v", e.where, e.keys, e.err)
}

func (e *authError) Unwrap() []error { return []error{backend.ErrAuth, e.err} }

// pingError is the error of a ping of the Redis r names that failed with
// err: an *authError when the server refused the credentials, else an
// *unreachableError.
func pingError(r Redis, err error) error {
	msg := err.Error()
	if errors.Is(err, backend.ErrAuth) || strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH") || strings.Contains(msg, "Protocol error: unauthenticated") ||
		strings.Contains(msg, "invalid password") || strings.Contains(msg, "invalid username-password") {
		keys := keyRedisUsername + " and " + keyRedisPassword
		if r.MasterName != "" {
			keys += " (" + keyRedisSentinelUser + " and " + keyRedisSentinelPass + " for the Sentinels)"
		}
		return &authError{where: r.Where(), keys: keys, err: err}
	}
	return &unreachableError{where: r.Where(), key: keyRedisAddrs, err: err, tls: r.TLSEnabled()}
}

// tlsHint says which key to look at when err is a TLS handshake's
// failure, or a failure that a TLS mismatch explains; else "". tls says
// whether the client spoke TLS.
func tlsHint(err error, tls bool) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	msg := err.Error()
	switch {
	case errors.As(err, &unknown):
		return "; the server's certificate is not signed by a CA of " + keyRedisTLSCAFile + " (or of the system's roots, without it)"
	case errors.As(err, &host):
		return "; the server's certificate is not for that host: set " + keyRedisTLSServer + " to a name it holds"
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "bad certificate"), strings.Contains(msg, "unknown certificate authority"):
		return "; the server wants a client certificate that its CA signed: " + keyRedisTLSCertFile + " and " + keyRedisTLSKeyFile
	case strings.Contains(msg, "does not look like a TLS handshake"),
		tls && errors.Is(err, context.DeadlineExceeded):
		return "; no TLS handshake: does the server speak TLS on that port? (" + keyRedisTLS + ")"
	case !tls && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return "; the server closed the connection: does it want TLS on that port? (" + keyRedisTLS + ")"
	case tls && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		// With TLS 1.3 a server that refuses the client's certificate (or
		// its lack of one) may close the connection before the client
		// reads its alert: the client then sees only the close.
		return "; the server closed the TLS connection: does it want a client certificate that its CA signed (" +
			keyRedisTLSCertFile + " and " + keyRedisTLSKeyFile + ")?"
	}
	return ""
}

func (e *unreachableError) Unwrap() []error { return []error{ErrUnreachable, e.err} }

// Problem is one thing wrong with the configuration.
type Problem struct {
	// Key is the configuration key, such as "redis.db". For an
	// environment variable that matches no key it is the variable's
	// name, such as "BATON_REDIS_DBX".
	Key string
	// Value is the offending value as written (shortened if long), or
	// "<redacted>" for passwords and tokens.
	Value string
	// Origin is where the value was read from, such as
	// "file baton.yaml" or "env BATON_REDIS_DB"; empty for Map and
	// Bytes sources and for values set in Go.
	Origin string
	// Reason says what is wrong, such as "must not be negative".
	Reason string
}

// String formats p as one line:
// "config: key=value (from origin): reason". Line breaks in the reason
// (an errors.Join's) become "; ".
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString("config: ")
	b.WriteString(p.Key)
	b.WriteByte('=')
	b.WriteString(p.Value)
	if p.Origin != "" {
		b.WriteString(" (from ")
		b.WriteString(p.Origin)
		b.WriteByte(')')
	}
	b.WriteString(": ")
	b.WriteString(strings.ReplaceAll(p.Reason, "\n", "; "))
	return b.String()
}

// Error lists every problem Load or Config.Validate found, so that all
// of them can be fixed in one pass. It wraps ErrInvalid.
type Error struct {
	// Problems holds at least one problem: first those found while
	// reading the sources (unknown keys, wrong types), then those of the
	// values, in the order of the reference table.
	Problems []Problem
}

// Error returns one line per problem.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// redacted replaces secret values in messages, String and logs.
const redacted = "<redacted>"

// redact hides a secret; an empty secret stays empty so that "not set"
// remains visible.
func redact(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}

// looksSecret reports whether an unknown key's name suggests it holds a
// secret, so that a typo such as redis.pasword does not print it.
func looksSecret(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"pass", "token", "secret", "credential", "auth", "pwd"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// maxValueLen is the longest value, in runes, a message shows in full.
const maxValueLen = 80

// shorten cuts a long value for a message.
func shorten(s string) string {
	if utf8.RuneCountInString(s) <= maxValueLen {
		return s
	}
	r := []rune(s)
	return string(r[:maxValueLen]) + "..."
}

// showString formats a string for a message: bare when that is
// unambiguous, quoted otherwise, with the password of an address's
// userinfo redacted (redis://:<redacted>@host:6379).
func showString(s string) string {
	s = backend.HideUserinfo(s)
	if s == "" || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '"' || r == '\'' || r == '=' {
			return strconv.Quote(s)
		}
	}
	return s
}

// show formats a raw value, as a source held it, for a message.
func show(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return shorten(showString(v))
	case []string:
		items := make([]string, len(v))
		for i, s := range v {
			items[i] = showString(s)
		}
		return shorten("[" + strings.Join(items, ", ") + "]")
	case []any:
		items := make([]string, len(v))
		for i, s := range v {
			items[i] = show(s)
		}
		return shorten("[" + strings.Join(items, ", ") + "]")
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Map {
		names := make([]string, 0, rv.Len())
		for _, k := range rv.MapKeys() {
			names = append(names, fmt.Sprint(k.Interface()))
		}
		sort.Strings(names)
		return shorten("{" + strings.Join(names, ", ") + "}")
	}
	return shorten(showString(fmt.Sprint(v)))
}
