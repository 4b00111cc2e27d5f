package instanceid

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on the parts of an ID. They leave room, within the 256-byte lease
// owner every backend accepts, for what the role package adds to an ID, and
// keep the Redis keys that embed "{tenant:app}" short.
const (
	// MaxNameLen is the longest tenant or app, in bytes.
	MaxNameLen = 64

	// MaxLen is the longest text form of a valid ID, in bytes: a bracketed
	// IPv6 address, two names of MaxNameLen bytes, a five-digit port and
	// the three separators: 177.
	MaxLen = len("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]") + 2*MaxNameLen + len("65535") + 3
)

// quote quotes a value for an error message, cut short if it is long.
func quote(s string) string {
	const max = 100
	if utf8.RuneCountInString(s) > max {
		return fmt.Sprintf("%.*q...", max, s)
	}
	return strconv.Quote(s)
}

// checkName reports whether s is usable as the tenant or app (part).
func checkName(part, s string) error {
	switch {
	case s == "":
		return invalid(part + ` "" is empty`)
	case len(s) > MaxNameLen:
		return invalid(fmt.Sprintf("%s %s is %d bytes long, more than %d", part, quote(s), len(s), MaxNameLen))
	case !utf8.ValidString(s):
		return invalid(fmt.Sprintf("%s %s is not valid UTF-8", part, quote(s)))
	}
	for _, r := range s {
		switch {
		case r == ':':
			return invalid(fmt.Sprintf("%s %s contains ':', the separator of ID parts", part, quote(s)))
		case r == '{' || r == '}':
			return invalid(fmt.Sprintf("%s %s contains %q; braces would break the {tenant:app} Redis hash tag", part, quote(s), r))
		case r == ' ' || !unicode.IsPrint(r):
			return invalid(fmt.Sprintf("%s %s contains %U; only printable characters other than spaces are allowed", part, quote(s), r))
		}
	}
	return nil
}

// checkPort reports whether p is a usable port.
func checkPort(p int) error {
	if p < 1 || p > 65535 {
		return invalid(fmt.Sprintf("port %q is not in 1..65535", strconv.Itoa(p)))
	}
	return nil
}

// parsePort parses the port part of an ID's text: decimal digits only, no
// sign and no leading zero, 1..65535.
func parsePort(s string) (uint16, error) {
	if s == "" {
		return 0, invalid(`port "" is empty`)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, invalid(fmt.Sprintf("port %s is not a decimal number", quote(s)))
		}
	}
	if s[0] == '0' && len(s) > 1 {
		return 0, invalid(fmt.Sprintf("port %s has a leading zero", quote(s)))
	}
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, invalid(fmt.Sprintf("port %s is not in 1..65535", quote(s)))
	}
	return uint16(n), nil
}

// checkAddr reports whether a is an address an instance may advertise:
// valid, without a zone, not IPv4-mapped (the ID holds the IPv4 address
// itself), not unspecified and not multicast. part names where the address
// came from in the message.
func checkAddr(part string, a netip.Addr) error {
	switch {
	case !a.IsValid():
		return invalid(part + ` "" is empty`)
	case a.Zone() != "":
		return invalid(fmt.Sprintf("%s %q has an IPv6 zone; an advertised address must be reachable without one", part, a))
	case a.Is4In6():
		return invalid(fmt.Sprintf("%s %q is an IPv4-mapped IPv6 address; use %q", part, a, a.Unmap()))
	case a.IsUnspecified():
		return invalid(fmt.Sprintf("%s %q is unspecified; an instance must advertise an address others can reach", part, a))
	case a.IsMulticast():
		return invalid(fmt.Sprintf("%s %q is a multicast address; an instance must advertise a unicast address", part, a))
	}
	return nil
}

// parseIP parses an IP given in configuration: an IPv4 or IPv6 address,
// IPv6 optionally in brackets, in any form net/netip accepts. An
// IPv4-mapped IPv6 address becomes the IPv4 address. part names the source
// in messages.
func parseIP(part, s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, invalid(part + ` "" is empty`)
	}
	text := s
	if len(text) >= 2 && text[0] == '[' && text[len(text)-1] == ']' {
		text = text[1 : len(text)-1]
	}
	a, err := netip.ParseAddr(text)
	if err != nil {
		return netip.Addr{}, notIP(part, s)
	}
	if a.Zone() == "" {
		a = a.Unmap()
	}
	if err := checkAddr(part, a); err != nil {
		return netip.Addr{}, err
	}
	return a, nil
}

// notIP is the error for a part s that does not parse as an IP address.
func notIP(part, s string) error {
	if isHostname(s) {
		return invalid(fmt.Sprintf("%s %s is a host name, not an IP address", part, quote(s)))
	}
	return invalid(fmt.Sprintf("%s %s is not an IP address", part, quote(s)))
}

// isHostname reports whether s looks like a host name rather than a
// mistyped IP address.
func isHostname(s string) bool {
	if strings.ContainsAny(s, ":[]%") {
		return false
	}
	return strings.ContainsFunc(s, func(r rune) bool {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
	})
}
