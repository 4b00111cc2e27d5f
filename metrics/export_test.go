package metrics

// WithNow makes Metrics read the time from now.
var WithNow = withNow
