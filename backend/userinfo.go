package backend

import "strings"

// Redacted stands in for a secret that HideUserinfo removed.
const Redacted = "<redacted>"

// HideUserinfo returns an address fit for messages and logs: s with the
// password of its userinfo replaced by Redacted. The part before the last
// '@' of an address written as a URL (scheme://user:password@host) keeps
// its user name and loses the rest ("user:<redacted>@", or "<redacted>@"
// for a bare token), and so does an address without a scheme whose part
// before the '@' holds a ':' (":pw@host:6379"). Any other string is
// returned as it is.
func HideUserinfo(s string) string {
	start, at, ok := userinfo(s)
	if !ok {
		return s
	}
	info := s[start:at]
	user, _, hasPass := strings.Cut(info, ":")
	if !hasPass {
		user = ""
	} else {
		user += ":"
	}
	return s[:start] + user + Redacted + s[at:]
}

// HasUserinfo reports whether s carries credentials that HideUserinfo
// hides.
func HasUserinfo(s string) bool {
	_, _, ok := userinfo(s)
	return ok
}

// userinfo finds the userinfo of s: from start to the last '@' at.
func userinfo(s string) (start, at int, ok bool) {
	at = strings.LastIndexByte(s, '@')
	if at < 0 {
		return 0, 0, false
	}
	if i := strings.Index(s, "://"); i >= 0 && i < at {
		start = i + len("://")
		return start, at, at > start
	}
	return 0, at, strings.IndexByte(s[:at], ':') >= 0
}
