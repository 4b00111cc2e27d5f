package redisbackend

import (
	"reflect"
	"time"
)

// SetMarkerTTL sets how long the watch markers of s outlive their last
// refresh; call it before the first Watch.
func SetMarkerTTL(s *Store, d time.Duration) { s.marker.ttl = d }

// UseScriptShim makes s run its scripts with shim in front of them.
func UseScriptShim(s *Store, shim string) {
	s.scripts = loadScripts(shim)
	s.marker.scripts = s.scripts
}

// GroupKeys returns the Redis keys of member group group.
func (s *Store) GroupKeys(group string) []string { return s.groupKeys(group) }

// ScriptFields returns how many fields a scriptSet has and how many
// scripts its each method visits.
func ScriptFields() (fields, visited int) {
	return reflect.TypeFor[scriptSet]().NumField(), len(leaseScripts.all())
}

// FunctionName returns the name of the library function that runs the
// script name ("get", "acquire", "group_members", ...).
func FunctionName(name string) string { return libraryName() + "_" + name }

// AskNotes returns how many owners' asks the store keeps noted for key's
// channel (subscriber.asking).
func (s *Store) AskNotes(key string) (n int) {
	s.onChannel(key, func(c *channel) { n = len(c.asked) })
	return n
}

// WakeChannel returns the store's wake-up channel of key, on which the
// handovers to its waiters are published.
func (s *Store) WakeChannel(key string) string { return s.wakeChannel(key) }
