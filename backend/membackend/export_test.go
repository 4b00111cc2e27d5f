package membackend

// Counters returns how many fencing counters s keeps, lapsed or not.
func Counters(s *Store) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fences)
}
