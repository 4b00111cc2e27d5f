package schedlock

// WithClock runs a gate's runs on c instead of the real clock.
var WithClock = withClock
