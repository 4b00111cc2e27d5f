// Package embedredis starts the in-process Redis (miniredis) that the
// examples run on when no Redis address is given, with its clock kept
// moving: miniredis expires keys only when told that time passed.
package embedredis

import (
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// Server is a running in-process Redis.
type Server struct {
	m       *miniredis.Miniredis
	done    chan struct{}
	stopped chan struct{}
}

// Start starts an in-process Redis on a free loopback port and a
// goroutine that moves its clock with the real one every tick; Close stops
// both.
func Start(tick time.Duration) (*Server, error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, fmt.Errorf("embedded Redis: %w", err)
	}
	s := &Server{m: m, done: make(chan struct{}), stopped: make(chan struct{})}
	go s.advance(tick)
	return s, nil
}

func (s *Server) advance(tick time.Duration) {
	defer close(s.stopped)
	t := time.NewTicker(tick)
	defer t.Stop()
	for last := time.Now(); ; {
		select {
		case <-s.done:
			return
		case now := <-t.C:
			s.m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.m.Addr() }

// Close stops the clock's goroutine and the server.
func (s *Server) Close() {
	close(s.done)
	<-s.stopped
	s.m.Close()
}
