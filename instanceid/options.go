package instanceid

// Options are the inputs of Detect. The zero value of each field means
// "not set"; App and Port must be set.
type Options struct {
	// IP is the address the instance advertises, set explicitly (config
	// key instance.ip). IPv4 or IPv6, an IPv6 address with or without
	// brackets. It wins over every other source; if it is set but not a
	// usable address, Detect fails rather than falling back.
	IP string
	// AdvertiseAddr is an address learnt from the environment by the
	// caller, such as a Consul agent's advertise address: "ip",
	// "ip:port" or "[ipv6]:port"; only the IP is used. Used when IP is
	// empty. A host name is an error: the ID must hold an IP.
	AdvertiseAddr string
	// Tenant is the tenant the instance serves. Default DefaultTenant
	// ("default").
	Tenant string
	// App is the application (service) name. Required.
	App string
	// Port is the service port, 1..65535. Required. It tells apart
	// instances on one host, so it should be the port the service
	// listens on.
	Port int
}
