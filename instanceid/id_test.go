package instanceid_test

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/baton-go/baton/instanceid"
)

func TestParseValid(t *testing.T) {
	tests := []struct {
		in   string
		want instanceid.ID
	}{
		{"10.0.0.7:acme:billing:8080", instanceid.ID{IP: netip.MustParseAddr("10.0.0.7"), Tenant: "acme", App: "billing", Port: 8080}},
		{"[fd00::7]:acme:billing:8080", instanceid.ID{IP: netip.MustParseAddr("fd00::7"), Tenant: "acme", App: "billing", Port: 8080}},
		{"[2001:db8::1]:default:x:1", instanceid.ID{IP: netip.MustParseAddr("2001:db8::1"), Tenant: "default", App: "x", Port: 1}},
		{"127.0.0.1:t:a:65535", instanceid.ID{IP: netip.MustParseAddr("127.0.0.1"), Tenant: "t", App: "a", Port: 65535}},
		{"[::1]:t:a:80", instanceid.ID{IP: netip.MustParseAddr("::1"), Tenant: "t", App: "a", Port: 80}},
		{"10.0.0.7:ténant:app-v2_x.y[1]:443", instanceid.ID{IP: netip.MustParseAddr("10.0.0.7"), Tenant: "ténant", App: "app-v2_x.y[1]", Port: 443}},
	}
	for _, tt := range tests {
		got, err := instanceid.Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Parse(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
		if s := got.String(); s != tt.in {
			t.Errorf("Parse(%q).String() = %q", tt.in, s)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("Parse(%q).Validate() = %v", tt.in, err)
		}
	}
}

func TestParseInvalid(t *testing.T) {
	long := strings.Repeat("a", instanceid.MaxNameLen+1)
	tests := []struct {
		in, wantErr string
	}{
		// Structure.
		{"", `instanceid: parse "": want ip:tenant:app:port`},
		{"10.0.0.7", "want ip:tenant:app:port"},
		{"10.0.0.7:billing:8080", "want ip:tenant:app:port"},
		{"acme:billing:8080", "want ip:tenant:app:port"},
		{":::", `ip "" is empty`},
		// Empty parts.
		{":acme:billing:8080", `ip "" is empty`},
		{"10.0.0.7::billing:8080", `tenant "" is empty`},
		{"10.0.0.7:acme::8080", `app "" is empty`},
		{"10.0.0.7:acme:billing:", `port "" is empty`},
		// ':' inside tenant or app cannot be written: the extra field is
		// taken as part of the IP.
		{"10.0.0.7:a:b:billing:8080", `ip "10.0.0.7:a" is not an IP address`},
		// Bad names.
		{"10.0.0.7:ac me:billing:8080", `tenant "ac me" contains U+0020`},
		{"10.0.0.7:acme:bill\ting:8080", `app "bill\ting" contains U+0009`},
		{"10.0.0.7:acme:bill\u200bing:8080", `app "bill\u200bing" contains U+200B`},
		{"10.0.0.7:acme:bill\u00a0ing:8080", `contains U+00A0`},
		{"10.0.0.7:{acme:billing:8080", `tenant "{acme" contains '{'`},
		{"10.0.0.7:acme:billing}:8080", `app "billing}" contains '}'`},
		{"10.0.0.7:acme:\xff:8080", `app "\xff" is not valid UTF-8`},
		{"10.0.0.7:" + long + ":billing:8080", "is 65 bytes long, more than 64"},
		// Bad ports.
		{"10.0.0.7:acme:billing:0", `port "0" is not in 1..65535`},
		{"10.0.0.7:acme:billing:65536", `port "65536" is not in 1..65535`},
		{"10.0.0.7:acme:billing:70000", `port "70000" is not in 1..65535`},
		{"10.0.0.7:acme:billing:99999999999999999999", `port "99999999999999999999" is not in 1..65535`},
		{"10.0.0.7:acme:billing:-1", `port "-1" is not a decimal number`},
		{"10.0.0.7:acme:billing:+80", `port "+80" is not a decimal number`},
		{"10.0.0.7:acme:billing:08a", `port "08a" is not a decimal number`},
		{"10.0.0.7:acme:billing:080", `port "080" has a leading zero`},
		{"10.0.0.7:acme:billing: 80", `port " 80" is not a decimal number`},
		{"10.0.0.7:acme:billing:0x50", `port "0x50" is not a decimal number`},
		// Bad IPs.
		{"10.0.0.300:acme:billing:8080", `ip "10.0.0.300" is not an IP address`},
		{"010.0.0.7:acme:billing:8080", `ip "010.0.0.7" is not an IP address`},
		{"host.example:acme:billing:8080", `ip "host.example" is a host name, not an IP address`},
		{"0.0.0.0:acme:billing:8080", `ip "0.0.0.0" is unspecified`},
		{"[::]:acme:billing:8080", `ip "::" is unspecified`},
		{"224.0.0.1:acme:billing:8080", `ip "224.0.0.1" is a multicast address`},
		{"[fe80::1%eth0]:acme:billing:8080", `ip "fe80::1%eth0" has an IPv6 zone`},
		{"[::ffff:10.0.0.7]:acme:billing:8080", `ip "::ffff:10.0.0.7" is an IPv4-mapped IPv6 address; use "10.0.0.7"`},
		// IPv6 brackets.
		{"fd00::7:acme:billing:8080", `ip "fd00::7" is an IPv6 address and must be in brackets: [fd00::7]`},
		{"::1:acme:billing:8080", `ip "::1" is an IPv6 address and must be in brackets`},
		{"[fd00::7:acme:billing:8080", `ip "[fd00::7" has unbalanced brackets`},
		{"fd00::7]:acme:billing:8080", `ip "fd00::7]" has unbalanced brackets`},
		{"[fd00::7]]:acme:billing:8080", `ip "[fd00::7]]" has unbalanced brackets`},
		{"[[fd00::7]:acme:billing:8080", `ip "[[fd00::7]" has unbalanced brackets`},
		{"[]:acme:billing:8080", `ip "[]" is not an IP address`},
		{"[:acme:billing:8080", `ip "[" has unbalanced brackets`},
		{"[10.0.0.7]:acme:billing:8080", `ip "[10.0.0.7]" is an IPv4 address and must not be in brackets: 10.0.0.7`},
		// Non-canonical IPv6.
		{"[FD00::7]:acme:billing:8080", `ip "[FD00::7]" is not in canonical form; write fd00::7`},
		{"[fd00:0:0:0:0:0:0:7]:acme:billing:8080", `is not in canonical form; write fd00::7`},
	}
	for _, tt := range tests {
		id, err := instanceid.Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want error containing %q", tt.in, id, tt.wantErr)
			continue
		}
		if !errors.Is(err, instanceid.ErrInvalid) {
			t.Errorf("Parse(%q) error %q does not wrap ErrInvalid", tt.in, err)
		}
		if !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Parse(%q) error = %q, want it to contain %q", tt.in, err, tt.wantErr)
		}
		if !strings.HasPrefix(err.Error(), "instanceid: parse ") {
			t.Errorf("Parse(%q) error = %q, want prefix %q", tt.in, err, "instanceid: parse ")
		}
		if !id.IsZero() {
			t.Errorf("Parse(%q) returned %#v with its error, want the zero ID", tt.in, id)
		}
	}
}

func TestParseErrorQuotesLongInputShort(t *testing.T) {
	in := strings.Repeat("x", 10000)
	_, err := instanceid.Parse(in)
	if err == nil || len(err.Error()) > 300 {
		t.Fatalf("Parse(10000 x) error = %q, want a short error", err)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		ip, tenant, app string
		port            int
		want            string
		wantErr         string
	}{
		{"10.0.0.7", "acme", "billing", 8080, "10.0.0.7:acme:billing:8080", ""},
		{"fd00::7", "acme", "billing", 8080, "[fd00::7]:acme:billing:8080", ""},
		{"[fd00::7]", "acme", "billing", 8080, "[fd00::7]:acme:billing:8080", ""},
		{"FD00:0::7", "acme", "billing", 8080, "[fd00::7]:acme:billing:8080", ""},
		{"::ffff:10.0.0.7", "acme", "billing", 8080, "10.0.0.7:acme:billing:8080", ""},
		{"", "acme", "billing", 8080, "", `instanceid: ip "" is empty`},
		{"10.0.0.300", "acme", "billing", 8080, "", `instanceid: ip "10.0.0.300" is not an IP address`},
		{"::", "acme", "billing", 8080, "", `instanceid: ip "::" is unspecified`},
		{"fe80::1%eth0", "acme", "billing", 8080, "", `instanceid: ip "fe80::1%eth0" has an IPv6 zone`},
		{"::ffff:10.0.0.7%eth0", "acme", "billing", 8080, "", `has an IPv6 zone`},
		{"10.0.0.7", "", "billing", 8080, "", `instanceid: tenant "" is empty`},
		{"10.0.0.7", "a:b", "billing", 8080, "", `instanceid: tenant "a:b" contains ':'`},
		{"10.0.0.7", "acme", "", 8080, "", `instanceid: app "" is empty`},
		{"10.0.0.7", "acme", "x:y", 8080, "", `instanceid: app "x:y" contains ':'`},
		{"10.0.0.7", "acme", "billing", 0, "", `instanceid: port "0" is not in 1..65535`},
		{"10.0.0.7", "acme", "billing", -1, "", `instanceid: port "-1" is not in 1..65535`},
		{"10.0.0.7", "acme", "billing", 65536, "", `instanceid: port "65536" is not in 1..65535`},
		{"10.0.0.7", "acme", "billing", 70000, "", `instanceid: port "70000" is not in 1..65535`},
	}
	for _, tt := range tests {
		id, err := instanceid.New(tt.ip, tt.tenant, tt.app, tt.port)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, instanceid.ErrInvalid) {
				t.Errorf("New(%q, %q, %q, %d) = %v, %v; want error containing %q wrapping ErrInvalid",
					tt.ip, tt.tenant, tt.app, tt.port, id, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("New(%q, %q, %q, %d): %v", tt.ip, tt.tenant, tt.app, tt.port, err)
			continue
		}
		if got := id.String(); got != tt.want {
			t.Errorf("New(%q, %q, %q, %d).String() = %q, want %q", tt.ip, tt.tenant, tt.app, tt.port, got, tt.want)
		}
	}
}

func TestValidate(t *testing.T) {
	ok := instanceid.ID{IP: netip.MustParseAddr("10.0.0.7"), Tenant: "acme", App: "billing", Port: 8080}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate(%v) = %v", ok, err)
	}
	tests := []struct {
		name    string
		edit    func(*instanceid.ID)
		wantErr string
	}{
		{"zero ip", func(id *instanceid.ID) { id.IP = netip.Addr{} }, `instanceid: ip "" is empty`},
		{"unspecified", func(id *instanceid.ID) { id.IP = netip.IPv4Unspecified() }, `instanceid: ip "0.0.0.0" is unspecified`},
		{"mapped", func(id *instanceid.ID) { id.IP = netip.MustParseAddr("::ffff:10.0.0.7") }, `instanceid: ip "::ffff:10.0.0.7" is an IPv4-mapped`},
		{"zone", func(id *instanceid.ID) { id.IP = netip.MustParseAddr("fe80::1%eth0") }, `instanceid: ip "fe80::1%eth0" has an IPv6 zone`},
		{"empty tenant", func(id *instanceid.ID) { id.Tenant = "" }, `instanceid: tenant "" is empty`},
		{"colon tenant", func(id *instanceid.ID) { id.Tenant = "a:b" }, `instanceid: tenant "a:b" contains ':'`},
		{"newline app", func(id *instanceid.ID) { id.App = "a\nb" }, `instanceid: app "a\nb" contains U+000A`},
		{"brace app", func(id *instanceid.ID) { id.App = "{x}" }, `instanceid: app "{x}" contains '{'`},
		{"zero port", func(id *instanceid.ID) { id.Port = 0 }, `instanceid: port "0" is not in 1..65535`},
	}
	for _, tt := range tests {
		id := ok
		tt.edit(&id)
		err := id.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) || !errors.Is(err, instanceid.ErrInvalid) {
			t.Errorf("%s: Validate(%#v) = %v, want error starting %q wrapping ErrInvalid", tt.name, id, err, tt.wantErr)
		}
	}
}

func TestStringUnmapsAndBrackets(t *testing.T) {
	tests := []struct {
		id   instanceid.ID
		want string
	}{
		{instanceid.ID{}, ""},
		{instanceid.ID{IP: netip.MustParseAddr("::ffff:10.0.0.7"), Tenant: "t", App: "a", Port: 1}, "10.0.0.7:t:a:1"},
		{instanceid.ID{IP: netip.MustParseAddr("fe80::1%eth0"), Tenant: "t", App: "a", Port: 1}, "[fe80::1%eth0]:t:a:1"},
		{instanceid.ID{IP: netip.MustParseAddr("2001:db8::1"), Tenant: "t", App: "a", Port: 65535}, "[2001:db8::1]:t:a:65535"},
	}
	for _, tt := range tests {
		if got := tt.id.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.id, got, tt.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	ids := []instanceid.ID{
		{IP: netip.MustParseAddr("10.0.0.7"), Tenant: "acme", App: "billing", Port: 8080},
		{IP: netip.MustParseAddr("192.0.2.255"), Tenant: "default", App: "a", Port: 1},
		{IP: netip.MustParseAddr("fd00::7"), Tenant: "acme", App: "billing", Port: 8080},
		{IP: netip.MustParseAddr("2001:db8:1:2:3:4:5:6"), Tenant: "t", App: "a", Port: 65535},
		{IP: netip.MustParseAddr("::1"), Tenant: "t", App: "a", Port: 2},
		{IP: netip.MustParseAddr("::10.0.0.1"), Tenant: "t", App: "a", Port: 2},
		{IP: netip.MustParseAddr("64:ff9b::10.0.0.1"), Tenant: "t", App: "a", Port: 2},
		{IP: netip.MustParseAddr("10.0.0.7"), Tenant: "日本", App: "x[1]]", Port: 9},
		{IP: netip.MustParseAddr("10.0.0.7"), Tenant: strings.Repeat("t", instanceid.MaxNameLen), App: strings.Repeat("a", instanceid.MaxNameLen), Port: 9},
	}
	for _, id := range ids {
		if err := id.Validate(); err != nil {
			t.Fatalf("Validate(%#v) = %v", id, err)
		}
		s := id.String()
		got, err := instanceid.Parse(s)
		if err != nil {
			t.Errorf("Parse(%q): %v", s, err)
			continue
		}
		if got != id {
			t.Errorf("Parse(%q) = %#v, want %#v", s, got, id)
		}
		if len(s) > instanceid.MaxLen {
			t.Errorf("len(%q) = %d, more than MaxLen %d", s, len(s), instanceid.MaxLen)
		}
		text, err := id.MarshalText()
		if err != nil || string(text) != s {
			t.Errorf("MarshalText(%#v) = %q, %v; want %q", id, text, err, s)
		}
		var back instanceid.ID
		if err := back.UnmarshalText(text); err != nil || back != id {
			t.Errorf("UnmarshalText(%q) = %#v, %v; want %#v", text, back, err, id)
		}
	}
}

func TestMaxLen(t *testing.T) {
	id := instanceid.ID{
		IP:     netip.MustParseAddr("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
		Tenant: strings.Repeat("t", instanceid.MaxNameLen),
		App:    strings.Repeat("a", instanceid.MaxNameLen),
		Port:   65535,
	}
	if got := len(id.String()); got != instanceid.MaxLen {
		t.Errorf("longest ID is %d bytes, MaxLen is %d", got, instanceid.MaxLen)
	}
}

func TestJSON(t *testing.T) {
	type doc struct {
		Master instanceid.ID   `json:"master"`
		Peers  []instanceid.ID `json:"peers"`
		None   instanceid.ID   `json:"none"`
	}
	in := doc{
		Master: instanceid.ID{IP: netip.MustParseAddr("fd00::7"), Tenant: "acme", App: "billing", Port: 8080},
		Peers:  []instanceid.ID{{IP: netip.MustParseAddr("10.0.0.7"), Tenant: "acme", App: "billing", Port: 8081}},
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"master":"[fd00::7]:acme:billing:8080","peers":["10.0.0.7:acme:billing:8081"],"none":""}`
	if string(b) != want {
		t.Fatalf("json.Marshal = %s, want %s", b, want)
	}
	var out doc
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if out.Master != in.Master || len(out.Peers) != 1 || out.Peers[0] != in.Peers[0] || !out.None.IsZero() {
		t.Fatalf("json round trip = %#v, want %#v", out, in)
	}

	if err := json.Unmarshal([]byte(`{"master":"10.0.0.7:acme:billing:0"}`), &out); !errors.Is(err, instanceid.ErrInvalid) {
		t.Errorf("json.Unmarshal of a bad ID: err = %v, want ErrInvalid", err)
	}
	if _, err := json.Marshal(instanceid.ID{Tenant: "acme"}); !errors.Is(err, instanceid.ErrInvalid) {
		t.Errorf("json.Marshal of an invalid ID: err = %v, want ErrInvalid", err)
	}
}

func TestStringAllocs(t *testing.T) {
	id := instanceid.ID{IP: netip.MustParseAddr("fd00::7"), Tenant: "acme", App: "billing", Port: 8080}
	if n := testing.AllocsPerRun(100, func() { _ = id.String() }); n > 1 {
		t.Errorf("String allocates %v times, want at most 1", n)
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		opts instanceid.Options
		want string // "" for valid
	}{
		{instanceid.Options{}, ""},
		{instanceid.Options{App: "billing", Tenant: "acme", Port: 8080, IP: "10.0.0.7"}, ""},
		{instanceid.Options{AdvertiseAddr: "10.0.0.7:8500"}, ""},
		{instanceid.Options{App: "bill:ing"}, `app "bill:ing" contains ':'`},
		{instanceid.Options{Tenant: "a{b}"}, `tenant "a{b}" contains '{'`},
		{instanceid.Options{Port: 70000}, `port "70000" is not in 1..65535`},
		{instanceid.Options{IP: "0.0.0.0"}, "unspecified"},
		{instanceid.Options{IP: "host.example"}, "host name"},
		{instanceid.Options{AdvertiseAddr: "consul.local:8500"}, "host name"},
	} {
		err := tc.opts.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.opts, err)
			}
			continue
		}
		if !errors.Is(err, instanceid.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want ErrInvalid mentioning %q", tc.opts, err, tc.want)
		}
	}
}
