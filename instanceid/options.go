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

// Validate checks the fields of o that are set by the rules Detect
// applies, without looking at the network interfaces: Tenant and App must
// be usable names, Port must be in 1..65535, IP must be a usable address
// and AdvertiseAddr must hold one. A zero field is not checked, so that a
// program may set App and Port later; Detect requires them. It returns the
// first problem, as an error that wraps ErrInvalid and names the part and
// its value.
func (o Options) Validate() error {
	if o.Tenant != "" {
		if err := checkName("tenant", o.Tenant); err != nil {
			return err
		}
	}
	if o.App != "" {
		if err := checkName("app", o.App); err != nil {
			return err
		}
	}
	if o.Port != 0 {
		if err := checkPort(o.Port); err != nil {
			return err
		}
	}
	if o.IP != "" {
		if _, err := parseIP("ip", o.IP); err != nil {
			return err
		}
	}
	if o.AdvertiseAddr != "" {
		if _, err := parseAdvertiseAddr(o.AdvertiseAddr); err != nil {
			return err
		}
	}
	return nil
}
