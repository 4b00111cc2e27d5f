package instanceid

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// DefaultTenant is the tenant of an instance whose tenant is not set.
const DefaultTenant = "default"

// ID identifies one instance of a service: the address it advertises, the
// tenant and application it serves, and its service port. Its text form is
// "ip:tenant:app:port", with an IPv6 address in brackets.
//
// ID is a comparable value: two valid IDs are equal exactly when their
// text forms are. IDs made by New, Parse and Detect are valid; an ID built
// as a struct literal should be checked with Validate.
type ID struct {
	// IP is the address the instance advertises. In a valid ID it is an
	// IPv4 address or an IPv6 address that is not IPv4-mapped, without a
	// zone, neither unspecified nor multicast.
	IP netip.Addr
	// Tenant is the tenant the instance serves.
	Tenant string
	// App is the application (service) name.
	App string
	// Port is the service port, 1..65535 in a valid ID.
	Port uint16
}

// New returns the ID of the instance at ip serving tenant and app on port,
// after checking every part. ip may be IPv4 or IPv6, an IPv6 address with
// or without brackets; an IPv4-mapped IPv6 address is stored as the IPv4
// address. tenant is not defaulted here: pass DefaultTenant explicitly.
func New(ip, tenant, app string, port int) (ID, error) {
	a, err := parseIP("ip", ip)
	if err != nil {
		return ID{}, err
	}
	if err := checkName("tenant", tenant); err != nil {
		return ID{}, err
	}
	if err := checkName("app", app); err != nil {
		return ID{}, err
	}
	if err := checkPort(port); err != nil {
		return ID{}, err
	}
	return ID{IP: a, Tenant: tenant, App: app, Port: uint16(port)}, nil
}

// Parse parses the text form of an ID, "ip:tenant:app:port". It splits at
// the last three colons, so the IP part may itself contain colons; an IPv6
// address must be in brackets, "[fd00::7]:acme:billing:8080", and an IPv4
// address must not be.
//
// Parse accepts only the text String produces: the IP in the canonical
// form of net/netip (lower-case hex, zeros compressed, IPv4 not mapped)
// and the port without leading zeros. So for every s that Parse accepts,
// Parse(s).String() == s, and IDs can be compared as text.
func Parse(s string) (ID, error) {
	id, err := parse(s)
	if err != nil {
		return ID{}, inInput(err, s)
	}
	return id, nil
}

func parse(s string) (ID, error) {
	rest, portText, ok1 := cutLast(s, ':')
	rest, app, ok2 := cutLast(rest, ':')
	ipText, tenant, ok3 := cutLast(rest, ':')
	if !ok1 || !ok2 || !ok3 {
		return ID{}, invalid("want ip:tenant:app:port, with an IPv6 ip in brackets")
	}
	a, err := parseCanonicalIP(ipText)
	if err != nil {
		return ID{}, err
	}
	if err := checkName("tenant", tenant); err != nil {
		return ID{}, err
	}
	if err := checkName("app", app); err != nil {
		return ID{}, err
	}
	port, err := parsePort(portText)
	if err != nil {
		return ID{}, err
	}
	return ID{IP: a, Tenant: tenant, App: app, Port: port}, nil
}

// cutLast slices s around the last sep.
func cutLast(s string, sep byte) (before, after string, found bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// parseCanonicalIP parses the IP part of an ID's text, which must be
// exactly what String writes.
func parseCanonicalIP(s string) (netip.Addr, error) {
	if s == "" {
		return netip.Addr{}, invalid(`ip "" is empty`)
	}
	text, bracketed := s, false
	if s[0] == '[' || s[len(s)-1] == ']' {
		if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
			return netip.Addr{}, invalid(fmt.Sprintf("ip %s has unbalanced brackets", quote(s)))
		}
		text, bracketed = s[1:len(s)-1], true
	}
	if strings.ContainsAny(text, "[]") {
		return netip.Addr{}, invalid(fmt.Sprintf("ip %s has unbalanced brackets", quote(s)))
	}
	a, err := netip.ParseAddr(text)
	if err != nil {
		return netip.Addr{}, notIP("ip", s)
	}
	if err := checkAddr("ip", a); err != nil {
		return netip.Addr{}, err
	}
	switch {
	case a.Is6() && !bracketed:
		return netip.Addr{}, invalid(fmt.Sprintf("ip %s is an IPv6 address and must be in brackets: [%s]", quote(s), a))
	case a.Is4() && bracketed:
		return netip.Addr{}, invalid(fmt.Sprintf("ip %s is an IPv4 address and must not be in brackets: %s", quote(s), a))
	case a.String() != text:
		return netip.Addr{}, invalid(fmt.Sprintf("ip %s is not in canonical form; write %s", quote(s), a))
	}
	return a, nil
}

// Validate reports whether id is valid: its IP is an address an instance
// may advertise, Tenant and App are usable names and Port is not zero. The
// error wraps ErrInvalid and names the first part that is wrong.
func (id ID) Validate() error {
	if err := checkAddr("ip", id.IP); err != nil {
		return err
	}
	if err := checkName("tenant", id.Tenant); err != nil {
		return err
	}
	if err := checkName("app", id.App); err != nil {
		return err
	}
	return checkPort(int(id.Port))
}

// IsZero reports whether id is the zero ID, which stands for "no ID".
func (id ID) IsZero() bool { return id == ID{} }

// String returns the text form of id, "ip:tenant:app:port", with an IPv6
// address in brackets and an IPv4-mapped IPv6 address written as IPv4. The
// zero ID is written as "". String does not validate id; Parse accepts
// its result when Validate reports nil.
func (id ID) String() string {
	b := make([]byte, 0, 64)
	return string(id.appendTo(b))
}

// AppendText appends the text form of id, as String writes it, to b. It
// fails, wrapping ErrInvalid, if id is neither valid nor zero.
func (id ID) AppendText(b []byte) ([]byte, error) {
	if id.IsZero() {
		return b, nil
	}
	if err := id.Validate(); err != nil {
		return b, err
	}
	return id.appendTo(b), nil
}

// MarshalText implements encoding.TextMarshaler with the text form of id,
// so an ID is a string in JSON, YAML and slog output. The zero ID is "".
// It fails, wrapping ErrInvalid, if id is neither valid nor zero.
func (id ID) MarshalText() ([]byte, error) {
	return id.AppendText(make([]byte, 0, 64))
}

// UnmarshalText implements encoding.TextUnmarshaler with Parse; empty text
// gives the zero ID.
func (id *ID) UnmarshalText(text []byte) error {
	if len(text) == 0 {
		*id = ID{}
		return nil
	}
	v, err := Parse(string(text))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

func (id ID) appendTo(b []byte) []byte {
	if id.IsZero() {
		return b
	}
	ip := id.IP
	if ip.Is4In6() {
		ip = ip.Unmap()
	}
	if ip.Is6() {
		b = append(b, '[')
		b = ip.AppendTo(b)
		b = append(b, ']')
	} else {
		b = ip.AppendTo(b)
	}
	b = append(b, ':')
	b = append(b, id.Tenant...)
	b = append(b, ':')
	b = append(b, id.App...)
	b = append(b, ':')
	return strconv.AppendUint(b, uint64(id.Port), 10)
}
