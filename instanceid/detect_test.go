package instanceid

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

var (
	up       = net.FlagUp | net.FlagRunning | net.FlagBroadcast | net.FlagMulticast
	loopback = net.FlagUp | net.FlagRunning | net.FlagLoopback
)

// hostInterfaces is a typical host: loopback, a link-local-only
// interface, an interface that is down, then the real one.
var hostInterfaces = []netInterface{
	{flags: loopback, addrs: addrs("127.0.0.1", "::1")},
	{flags: up, addrs: addrs("fe80::1", "169.254.10.1")},
	{flags: 0, addrs: addrs("10.9.9.9")},
	{flags: up, addrs: addrs("fe80::2", "fd00::7", "10.0.0.7", "10.0.0.8")},
	{flags: up, addrs: addrs("192.0.2.1")},
}

func fixedList(ifaces []netInterface) func() ([]netInterface, error) {
	return func() ([]netInterface, error) { return ifaces, nil }
}

// mustNotList fails the test if Detect enumerates interfaces.
func mustNotList(t *testing.T) func() ([]netInterface, error) {
	return func() ([]netInterface, error) {
		t.Helper()
		t.Error("interfaces were listed although an IP source was set")
		return hostInterfaces, nil
	}
}

func TestDetectPrecedence(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"explicit ip wins", Options{IP: "10.1.1.1", AdvertiseAddr: "10.2.2.2:8500", App: "billing", Port: 8080}, "10.1.1.1:default:billing:8080"},
		{"explicit ipv6", Options{IP: "fd00::1", App: "billing", Port: 8080}, "[fd00::1]:default:billing:8080"},
		{"explicit bracketed ipv6", Options{IP: "[fd00::1]", App: "billing", Port: 8080}, "[fd00::1]:default:billing:8080"},
		{"explicit mapped ipv4", Options{IP: "::ffff:10.1.1.1", App: "billing", Port: 8080}, "10.1.1.1:default:billing:8080"},
		{"explicit loopback", Options{IP: "127.0.0.1", App: "billing", Port: 8080}, "127.0.0.1:default:billing:8080"},
		{"advertise host", Options{AdvertiseAddr: "10.2.2.2", Tenant: "acme", App: "billing", Port: 8080}, "10.2.2.2:acme:billing:8080"},
		{"advertise host:port", Options{AdvertiseAddr: "10.2.2.2:8500", Tenant: "acme", App: "billing", Port: 8080}, "10.2.2.2:acme:billing:8080"},
		{"advertise [v6]:port", Options{AdvertiseAddr: "[fd00::2]:8500", Tenant: "acme", App: "billing", Port: 8080}, "[fd00::2]:acme:billing:8080"},
		{"advertise [v6]", Options{AdvertiseAddr: "[fd00::2]", Tenant: "acme", App: "billing", Port: 8080}, "[fd00::2]:acme:billing:8080"},
		{"advertise bare v6", Options{AdvertiseAddr: "fd00::2", Tenant: "acme", App: "billing", Port: 8080}, "[fd00::2]:acme:billing:8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := detect(tt.opts, mustNotList(t))
			if err != nil {
				t.Fatalf("Detect(%+v): %v", tt.opts, err)
			}
			if got := id.String(); got != tt.want {
				t.Errorf("Detect(%+v) = %q, want %q", tt.opts, got, tt.want)
			}
			if err := id.Validate(); err != nil {
				t.Errorf("Detect(%+v).Validate() = %v", tt.opts, err)
			}
		})
	}
}

func TestDetectInterfaces(t *testing.T) {
	tests := []struct {
		name   string
		ifaces []netInterface
		want   string
	}{
		{"first IPv4 of first usable interface", hostInterfaces, "10.0.0.7"},
		{"IPv4 on a later interface beats IPv6 on an earlier one", []netInterface{
			{flags: up, addrs: addrs("fd00::1")},
			{flags: up, addrs: addrs("10.0.0.2")},
		}, "10.0.0.2"},
		{"IPv6 global when no IPv4", []netInterface{
			{flags: loopback, addrs: addrs("127.0.0.1")},
			{flags: up, addrs: addrs("fe80::1", "2001:db8::5", "fd00::6")},
		}, "2001:db8::5"},
		{"IPv4 in 16-byte form", []netInterface{
			{flags: up, addrs: addrs("::ffff:10.0.0.3")},
		}, "10.0.0.3"},
		{"loopback flag skips even global addresses", []netInterface{
			{flags: loopback, addrs: addrs("10.0.0.1")},
			{flags: up, addrs: addrs("10.0.0.2")},
		}, "10.0.0.2"},
		{"down interface skipped", []netInterface{
			{flags: net.FlagBroadcast, addrs: addrs("10.0.0.1")},
			{flags: up, addrs: addrs("10.0.0.2")},
		}, "10.0.0.2"},
		{"odd addresses skipped", []netInterface{
			{flags: up, addrs: []netip.Addr{{}, netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("224.0.0.1"),
				netip.MustParseAddr("255.255.255.255"), netip.MustParseAddr("127.0.0.5"), netip.MustParseAddr("ff02::1"),
				netip.MustParseAddr("fe80::9%eth0"), netip.MustParseAddr("fd00::9")}},
		}, "fd00::9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := detect(Options{Tenant: "acme", App: "billing", Port: 8080}, fixedList(tt.ifaces))
			if err != nil {
				t.Fatalf("detect: %v", err)
			}
			if got := id.IP.String(); got != tt.want {
				t.Errorf("detect chose %s, want %s", got, tt.want)
			}
			if err := id.Validate(); err != nil {
				t.Errorf("Validate(%v) = %v", id, err)
			}
		})
	}
}

func TestDetectNoAddress(t *testing.T) {
	opts := Options{App: "billing", Port: 8080}
	for name, ifaces := range map[string][]netInterface{
		"none":       nil,
		"loopback":   {{flags: loopback, addrs: addrs("127.0.0.1", "::1")}},
		"link-local": {{flags: up, addrs: addrs("fe80::1", "169.254.0.9")}},
		"down":       {{flags: 0, addrs: addrs("10.0.0.1")}},
	} {
		_, err := detect(opts, fixedList(ifaces))
		if !errors.Is(err, ErrNoAddress) || errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrNoAddress", name, err)
			continue
		}
		for _, want := range []string{"Options.IP", "instance.ip"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: err = %q, want it to mention %s", name, err, want)
			}
		}
	}

	boom := errors.New("boom")
	_, err := detect(opts, func() ([]netInterface, error) { return nil, boom })
	if !errors.Is(err, ErrNoAddress) || !errors.Is(err, boom) || !strings.Contains(err.Error(), "Options.IP") {
		t.Errorf("list error: err = %v, want ErrNoAddress wrapping boom and naming Options.IP", err)
	}
}

func TestDetectInvalid(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"no app", Options{IP: "10.0.0.1", Port: 8080}, `instanceid: app "" is empty`},
		{"no port", Options{IP: "10.0.0.1", App: "billing"}, `instanceid: port "0" is not in 1..65535`},
		{"negative port", Options{IP: "10.0.0.1", App: "billing", Port: -1}, `instanceid: port "-1" is not in 1..65535`},
		{"big port", Options{IP: "10.0.0.1", App: "billing", Port: 70000}, `instanceid: port "70000" is not in 1..65535`},
		{"colon tenant", Options{IP: "10.0.0.1", Tenant: "a:b", App: "billing", Port: 1}, `instanceid: tenant "a:b" contains ':'`},
		{"space app", Options{IP: "10.0.0.1", App: "bill ing", Port: 1}, `instanceid: app "bill ing" contains U+0020`},
		{"brace tenant", Options{IP: "10.0.0.1", Tenant: "{a}", App: "billing", Port: 1}, `instanceid: tenant "{a}" contains '{'`},
		{"bad ip does not fall back", Options{IP: "10.0.0.300", AdvertiseAddr: "10.0.0.2", App: "billing", Port: 1}, `instanceid: ip "10.0.0.300" is not an IP address`},
		{"ip with port", Options{IP: "10.0.0.1:80", App: "billing", Port: 1}, `instanceid: ip "10.0.0.1:80" is not an IP address`},
		{"unspecified ip", Options{IP: "0.0.0.0", App: "billing", Port: 1}, `instanceid: ip "0.0.0.0" is unspecified`},
		{"ip hostname", Options{IP: "db.local", App: "billing", Port: 1}, `instanceid: ip "db.local" is a host name, not an IP address`},
		{"zone ip", Options{IP: "fe80::1%eth0", App: "billing", Port: 1}, `instanceid: ip "fe80::1%eth0" has an IPv6 zone`},
		{"advertise hostname", Options{AdvertiseAddr: "consul.local", App: "billing", Port: 1},
			`instanceid: advertise address "consul.local" is a host name, not an IP address; an IP is required: set Options.IP (config key instance.ip)`},
		{"advertise hostname:port", Options{AdvertiseAddr: "consul.local:8500", App: "billing", Port: 1},
			`instanceid: advertise address "consul.local:8500": host "consul.local" is a host name, not an IP address; an IP is required`},
		{"advertise bad ip", Options{AdvertiseAddr: "10.0.0.300:8500", App: "billing", Port: 1},
			`instanceid: advertise address "10.0.0.300:8500": host "10.0.0.300" is not an IP address`},
		{"advertise no host", Options{AdvertiseAddr: ":8500", App: "billing", Port: 1},
			`instanceid: advertise address ":8500": host "" is empty`},
		{"advertise unspecified", Options{AdvertiseAddr: "0.0.0.0:8500", App: "billing", Port: 1},
			`instanceid: advertise address "0.0.0.0:8500": host "0.0.0.0" is unspecified`},
		{"advertise unbalanced", Options{AdvertiseAddr: "[fd00::1:8500", App: "billing", Port: 1},
			`instanceid: advertise address "[fd00::1:8500" is not an IP address`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := detect(tt.opts, mustNotList(t))
			if err == nil {
				t.Fatalf("Detect(%+v) = %v, want error", tt.opts, id)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			if !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("error = %q, want prefix %q", err, tt.wantErr)
			}
		})
	}
}

// TestDetectChecksOptionsFirst: a missing app is reported even when no
// interface would do, without listing interfaces.
func TestDetectChecksOptionsFirst(t *testing.T) {
	_, err := detect(Options{}, mustNotList(t))
	if err == nil || !strings.Contains(err.Error(), `app "" is empty`) {
		t.Errorf("Detect(Options{}) = %v, want the missing app reported", err)
	}
}

// TestDetectSystem runs Detect on the real host: whatever it picks must be
// a valid ID, or the error must be ErrNoAddress.
func TestDetectSystem(t *testing.T) {
	id, err := Detect(Options{App: "billing", Port: 8080})
	if err != nil {
		if !errors.Is(err, ErrNoAddress) {
			t.Fatalf("Detect: %v, want success or ErrNoAddress", err)
		}
		t.Logf("Detect: %v", err)
		return
	}
	if err := id.Validate(); err != nil {
		t.Fatalf("Detect() = %v, Validate: %v", id, err)
	}
	if !id.IP.IsGlobalUnicast() {
		t.Errorf("Detect chose %v, not a global unicast address", id.IP)
	}
	t.Logf("Detect() = %v", id)
}
