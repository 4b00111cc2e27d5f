package instanceid

// Options are the inputs of Detect.
type Options struct {
	// IP is the address the instance advertises, set explicitly. It wins
	// over every other source.
	IP string
	// AdvertiseAddr is an address learnt from the environment by the
	// caller, such as a Consul agent's advertise address. Used when IP is
	// empty.
	AdvertiseAddr string
	// Tenant is the tenant the instance serves. Default "default".
	Tenant string
	// App is the application (service) name. Required.
	App string
	// Port is the service port, 1..65535. Required.
	Port int
}
