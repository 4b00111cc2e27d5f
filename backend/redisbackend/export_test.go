package redisbackend

import "time"

// SetMarkerTTL sets how long the watch markers of s outlive their last
// refresh; call it before the first Watch.
func SetMarkerTTL(s *Store, d time.Duration) { s.marker.ttl = d }
