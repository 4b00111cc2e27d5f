package backend

// Unannounced is implemented by stores on which a key can be freed
// without any Watch event, because a system other than baton writes the
// same keys (springredis: the Java side of a mixed fleet deletes its keys
// with a plain DEL). A waiter on such a store cannot sleep out the lease
// it last saw on the strength of its Watch alone: it looks again at its
// own interval (role: every heartbeat, as the framework's slaves do).
type Unannounced interface {
	// ReleasesUnannounced reports whether a key may be freed without an
	// event.
	ReleasesUnannounced() bool
}
