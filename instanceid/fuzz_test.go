package instanceid_test

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/baton-go/baton/instanceid"
)

// FuzzParse checks that Parse never panics, that every error wraps
// ErrInvalid, and that whatever Parse accepts is a valid ID whose text
// form is the input itself.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"10.0.0.7:acme:billing:8080",
		"[fd00::7]:acme:billing:8080",
		"[2001:db8:1:2:3:4:5:6]:t:a:65535",
		"[::1]:t:a:1",
		"127.0.0.1:default:ü:80",
		"10.0.0.7:a:b[x]:9",
		"",
		":::",
		"10.0.0.7:acme:billing:0",
		"10.0.0.7:acme:billing:65536",
		"10.0.0.7:acme:billing:+80",
		"10.0.0.7:acme:billing:08",
		"10.0.0.7:a{:b:1",
		"10.0.0.7:a b:c:1",
		"10.0.0.7:\xff:c:1",
		"fd00::7:acme:billing:8080",
		"[fd00::7:acme:billing:8080",
		"fd00::7]:acme:billing:8080",
		"[10.0.0.7]:acme:billing:8080",
		"[::ffff:10.0.0.7]:acme:billing:8080",
		"[fe80::1%eth0]:acme:billing:8080",
		"[FD00::7]:acme:billing:8080",
		"0.0.0.0:acme:billing:8080",
		"[::]:acme:billing:8080",
		"10.0.0.300:acme:billing:8080",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := instanceid.Parse(s)
		if err != nil {
			if !errors.Is(err, instanceid.ErrInvalid) {
				t.Fatalf("Parse(%q) error %q does not wrap ErrInvalid", s, err)
			}
			if !id.IsZero() {
				t.Fatalf("Parse(%q) returned %#v with an error", s, id)
			}
			return
		}
		if err := id.Validate(); err != nil {
			t.Fatalf("Parse(%q) = %#v, which Validate rejects: %v", s, id, err)
		}
		if got := id.String(); got != s {
			t.Fatalf("Parse(%q).String() = %q, want the input", s, got)
		}
		if len(s) > instanceid.MaxLen {
			t.Fatalf("Parse accepted %q, %d bytes, more than MaxLen %d", s, len(s), instanceid.MaxLen)
		}
		again, err := instanceid.Parse(id.String())
		if err != nil || again != id {
			t.Fatalf("Parse(%q) = %#v, %v; want %#v", id.String(), again, err, id)
		}
	})
}

// FuzzRoundTrip checks the other direction: every ID that Validate accepts
// prints as text that Parse turns back into the same ID.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{10, 0, 0, 7}, "acme", "billing", uint16(8080))
	f.Add([]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7}, "default", "x", uint16(1))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7}, "t", "a", uint16(65535))
	f.Add([]byte{0, 0, 0, 0}, "t", "a", uint16(1))
	f.Add([]byte{10, 0, 0, 7}, "a]", "[b", uint16(2))
	f.Add([]byte{10, 0, 0, 7}, "a:b", "c", uint16(2))
	f.Fuzz(func(t *testing.T, ip []byte, tenant, app string, port uint16) {
		a, ok := netip.AddrFromSlice(ip)
		if !ok {
			return
		}
		id := instanceid.ID{IP: a, Tenant: tenant, App: app, Port: port}
		if err := id.Validate(); err != nil {
			if !errors.Is(err, instanceid.ErrInvalid) {
				t.Fatalf("Validate(%#v) error %q does not wrap ErrInvalid", id, err)
			}
			if _, err := id.MarshalText(); err == nil {
				t.Fatalf("MarshalText(%#v) succeeded for an invalid ID", id)
			}
			return
		}
		s := id.String()
		if !utf8.ValidString(s) {
			t.Fatalf("String(%#v) = %q, not valid UTF-8", id, s)
		}
		got, err := instanceid.Parse(s)
		if err != nil || got != id {
			t.Fatalf("Parse(%q) = %#v, %v; want %#v", s, got, err, id)
		}
		n, err := instanceid.New(a.String(), tenant, app, int(port))
		if err != nil || n != id {
			t.Fatalf("New(%q, %q, %q, %d) = %#v, %v; want %#v", a, tenant, app, port, n, err, id)
		}
	})
}

// FuzzDetectAddress checks the addresses Detect reads from configuration
// and the environment (Options.IP, Options.AdvertiseAddr): every error
// wraps ErrInvalid and names the option, and every address accepted makes
// a valid ID whose IP, written in any form the options take, is read back
// as the same ID.
func FuzzDetectAddress(f *testing.F) {
	for _, s := range []string{
		"10.0.0.7", "10.0.0.7:8500", "[fd00::7]:8500", "[fd00::7]", "fd00::7", "FD00::7",
		"::ffff:10.0.0.7", "[::ffff:10.0.0.7]:8500", "fe80::1%eth0", "[fe80::1%eth0]:8500",
		"0.0.0.0", "[::]:8500", "224.0.0.1", "ff02::1", "10.0.0.300", "10.0.0.7:", ":8500",
		"consul.local", "consul.local:8500", "[10.0.0.7]", "[[fd00::7]]:1", "", " 10.0.0.7",
	} {
		f.Add(s)
	}
	base := instanceid.Options{Tenant: "acme", App: "billing", Port: 8080}
	detect := func(ip, advertise string) (instanceid.ID, error) {
		o := base
		o.IP, o.AdvertiseAddr = ip, advertise
		return instanceid.Detect(o)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []struct {
			option, ip, advertise, says string
		}{
			{"IP", s, "", "instanceid: ip "},
			{"AdvertiseAddr", "", s, "instanceid: advertise address "},
		} {
			if s == "" {
				break // an empty option is not set: Detect would look at the interfaces
			}
			id, err := detect(c.ip, c.advertise)
			if err != nil {
				if !errors.Is(err, instanceid.ErrInvalid) || !id.IsZero() {
					t.Fatalf("Detect(%s %q) = %#v, %v; want only an ErrInvalid", c.option, s, id, err)
				}
				if !strings.HasPrefix(err.Error(), c.says) {
					t.Fatalf("Detect(%s %q): error %q does not begin %q", c.option, s, err, c.says)
				}
				continue
			}
			if err := id.Validate(); err != nil {
				t.Fatalf("Detect(%s %q) = %#v, which Validate rejects: %v", c.option, s, id, err)
			}
			if ap, err := netip.ParseAddrPort(s); err == nil && c.option == "AdvertiseAddr" && id.IP != ap.Addr().Unmap() {
				t.Fatalf("Detect(AdvertiseAddr %q) advertises %v; want the IP of the address, %v", s, id.IP, ap.Addr().Unmap())
			}
			text := id.IP.String()
			for _, again := range []struct{ ip, advertise string }{
				{text, ""}, {"[" + text + "]", ""}, {"", text}, {"", net.JoinHostPort(text, "8500")},
			} {
				if got, err := detect(again.ip, again.advertise); err != nil || got != id {
					t.Fatalf("Detect(%s %q) = %#v; Detect(IP %q, AdvertiseAddr %q) = %#v, %v, not the same ID",
						c.option, s, id, again.ip, again.advertise, got, err)
				}
			}
			if c.option == "IP" {
				if got, err := detect("", s); err != nil || got != id {
					t.Fatalf("Detect(IP %q) = %#v; as AdvertiseAddr it gives %#v, %v", s, id, got, err)
				}
			}
		}
	})
}
