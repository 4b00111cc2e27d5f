package role

// Flaky is the test store wrapper that fails every call while cut off
// (a crashed process, or one cut off from the store by the network), for
// the external tests.
type Flaky = flaky
