package testenv

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// process is the life of one server process testenv owns, shared by
// Redis and Consul: the current process (nil while the server is down),
// whether the server was closed for good, and its private directory.
type process struct {
	mu     sync.Mutex // guards p and closed
	p      *proc
	closed bool
	dir    string
}

// PID returns the process id, or 0 when the server is down.
func (s *process) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil || s.p.exited() {
		return 0
	}
	return s.p.pid()
}

// killLocked kills the process with SIGKILL; a server that is down is
// left alone. The caller holds s.mu.
func (s *process) killLocked() error {
	if s.p == nil {
		return nil
	}
	err := s.p.kill()
	s.p = nil
	return err
}

// stopLocked stops the process cleanly (SIGTERM, SIGKILL after
// stopGrace). The caller holds s.mu.
func (s *process) stopLocked() error {
	if s.p == nil {
		return nil
	}
	err := s.p.terminate(stopGrace)
	s.p = nil
	return err
}

// relaunchLocked runs launch until it starts the server, retrying while
// the server's port is taken until timeout passes. The caller holds s.mu.
func (s *process) relaunchLocked(timeout time.Duration, launch func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := launch()
		if err == nil || !errors.Is(err, errPortInUse) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// signal sends sig to the process group of the running server named
// what (for errors).
func (s *process) signal(sig signal, what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.p == nil || s.p.exited() {
		return fmt.Errorf("%w: %s", ErrNotRunning, what)
	}
	return s.p.signalGroup(sig)
}

// close kills the server and removes its directory. It is idempotent.
func (s *process) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.killLocked()
	if rmErr := os.RemoveAll(s.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("testenv: remove %s: %w", s.dir, rmErr))
	}
	return err
}
