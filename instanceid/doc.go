// Package instanceid computes and parses instance IDs, the names baton
// gives to the instances of a service in role keys, lock owners and
// membership lists.
//
// # What an ID is
//
// An ID is "ip:tenant:app:port", for instance
//
//	10.0.0.7:acme:billing:8080
//	[fd00::7]:acme:billing:8080
//
// ip is the address the instance advertises, tenant the tenant it serves
// (DefaultTenant, "default", unless set), app the application name and
// port the service port. An IPv6 address is always written in brackets and
// an IPv4 address never is; an IPv4-mapped IPv6 address is written, and
// stored, as the IPv4 address. Parse splits the text at its last three
// colons, so the colons of an IPv6 address do not confuse it.
//
// # How an ID is computed
//
// IDs are computed, not chosen: Detect takes the IP from Options.IP if
// set, else from Options.AdvertiseAddr (such as a Consul agent's advertise
// address), else from the first UP, non-loopback network interface with a
// global unicast address (IPv4 preferred over IPv6). Tenant, App and Port
// come from Options.
//
// # Rules
//
// Every ID that New, Parse or Detect returns obeys these rules, and
// Validate checks them:
//   - ip is a valid IPv4 or IPv6 address, not unspecified (0.0.0.0, ::),
//     not multicast, without an IPv6 zone: other instances must be able to
//     reach it.
//   - tenant and app are non-empty, at most MaxNameLen bytes of valid
//     UTF-8, of printable characters other than spaces, without ':' (the
//     separator) or '{' and '}' (they would break the "{tenant:app}" hash
//     tags that keep a service's Redis keys in one Cluster slot).
//   - port is 1..65535, written in decimal without sign or leading zero.
//
// Errors wrap ErrInvalid and name the offending part and value, as in
// `instanceid: port "70000" is not in 1..65535`.
//
// # What is not promised
//
// An ID is not unique by construction. A process restarted on the same
// host and port gets the same ID as its predecessor, which is what lets a
// restarted master be recognised, but it also means two live processes can
// claim one ID: an overlapping restart, a copied configuration, two
// containers behind one NAT address. This package cannot tell them apart;
// uniqueness is enforced at run time by the role package, which detects
// two live processes with one ID and reports them.
//
// Detect's interface fallback picks an address, not necessarily the one
// peers reach: on hosts with several interfaces (Docker bridges, VPNs) set
// Options.IP.
package instanceid
