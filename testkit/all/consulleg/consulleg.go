// Package consulleg holds the Consul leg of the store-table tests of role,
// synclock, schedlock, statuspage and metrics: the script run (make
// consul-leg) runs those tests from this module with the Consul store
// linked in, and testdata/<package>/ keeps each package's tests that use
// Consul directly, which run only there. The package itself links
// consultest, so that this module requires it.
package consulleg

import _ "github.com/baton-go/baton/testkit/consultest" // fills storetest's Consul entry
