package instanceid

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
)

// Detect computes the ID of this instance from opts.
//
// The IP is, in order of precedence:
//  1. opts.IP, if set;
//  2. the address part of opts.AdvertiseAddr, if set ("host", "host:port"
//     or "[ipv6]:port"; the host must be an IP address, not a name);
//  3. an address of the host's UP, non-loopback network interfaces, taken
//     in the order the system lists them: the first IPv4 global unicast
//     address, or if there is none the first IPv6 global unicast address.
//     Loopback, link-local, multicast and unspecified addresses are never
//     chosen.
//
// A source that is set but wrong is an error; Detect does not fall back to
// the next one. Tenant defaults to DefaultTenant; App and Port are
// required. Errors about the options wrap ErrInvalid and name the part and
// its value; when no interface has a usable address the error wraps
// ErrNoAddress.
//
// On a host with several interfaces (a Docker bridge, a VPN) the first
// usable one may not be the one peers reach; set opts.IP there.
func Detect(opts Options) (ID, error) {
	return detect(opts, systemInterfaces)
}

// netInterface is what detect needs to know about one network interface.
type netInterface struct {
	flags net.Flags
	addrs []netip.Addr
}

// detect is Detect with the interface list injected, for tests.
func detect(opts Options, list func() ([]netInterface, error)) (ID, error) {
	tenant := opts.Tenant
	if tenant == "" {
		tenant = DefaultTenant
	}
	if err := checkName("tenant", tenant); err != nil {
		return ID{}, err
	}
	if err := checkName("app", opts.App); err != nil {
		return ID{}, err
	}
	if err := checkPort(opts.Port); err != nil {
		return ID{}, err
	}

	var ip netip.Addr
	var err error
	switch {
	case opts.IP != "":
		ip, err = parseIP("ip", opts.IP)
	case opts.AdvertiseAddr != "":
		ip, err = parseAdvertiseAddr(opts.AdvertiseAddr)
	default:
		ip, err = interfaceAddr(list)
	}
	if err != nil {
		return ID{}, err
	}
	return ID{IP: ip, Tenant: tenant, App: opts.App, Port: uint16(opts.Port)}, nil
}

// parseAdvertiseAddr takes the IP out of "ip", "[ipv6]", "ip:port" or
// "[ipv6]:port". An IPv6 address with a port must be in brackets.
func parseAdvertiseAddr(s string) (netip.Addr, error) {
	host, part := s, "advertise address"
	if h, _, err := net.SplitHostPort(s); err == nil {
		host, part = h, fmt.Sprintf("advertise address %s: host", quote(s))
	}
	a, err := parseIP(part, host)
	if err != nil && isHostname(host) {
		return netip.Addr{}, fmt.Errorf("%w; an IP is required: set Options.IP (config key instance.ip)", err)
	}
	return a, err
}

// interfaceAddr picks the address to advertise from the interfaces list
// returns: the first IPv4 global unicast address of an UP, non-loopback
// interface, else the first such IPv6 address.
func interfaceAddr(list func() ([]netInterface, error)) (netip.Addr, error) {
	ifaces, err := list()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%w: listing network interfaces failed: %w; set Options.IP (config key instance.ip)", ErrNoAddress, err)
	}
	var v4, v6 netip.Addr
	for _, ifc := range ifaces {
		if ifc.flags&net.FlagUp == 0 || ifc.flags&net.FlagLoopback != 0 {
			continue
		}
		for _, a := range ifc.addrs {
			if a.Zone() == "" {
				a = a.Unmap()
			}
			if !usable(a) {
				continue
			}
			if a.Is4() && !v4.IsValid() {
				v4 = a
			}
			if a.Is6() && !v6.IsValid() {
				v6 = a
			}
		}
	}
	switch {
	case v4.IsValid():
		return v4, nil
	case v6.IsValid():
		return v6, nil
	}
	return netip.Addr{}, fmt.Errorf("%w: no UP, non-loopback network interface has a global unicast IPv4 or IPv6 address; "+
		"set Options.IP (config key instance.ip)", ErrNoAddress)
}

// usable reports whether a may be chosen from an interface.
func usable(a netip.Addr) bool {
	return a.IsGlobalUnicast() && a.Zone() == "" && checkAddr("ip", a) == nil
}

// systemInterfaces lists the host's network interfaces. An interface whose
// addresses cannot be read is left out.
func systemInterfaces() ([]netInterface, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]netInterface, 0, len(ifs))
	var errs []error
	for _, ifc := range ifs {
		addrs, err := ifc.Addrs()
		if err != nil {
			errs = append(errs, fmt.Errorf("interface %s: %w", ifc.Name, err))
			continue
		}
		ni := netInterface{flags: ifc.Flags}
		for _, addr := range addrs {
			var ip net.IP
			switch v := addr.(type) {
			case *net.IPNet:
				ip = v.IP
			case *net.IPAddr:
				ip = v.IP
			}
			if a, ok := netip.AddrFromSlice(ip); ok {
				ni.addrs = append(ni.addrs, a)
			}
		}
		out = append(out, ni)
	}
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
