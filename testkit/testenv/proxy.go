package testenv

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections from a loopback port to a loopback
// target, such as a Redis, and can cut them off the way a network
// partition does. Tests point one client at Addr and others straight at
// the target, then call Blackhole to cut the first off alone.
//
// While black-holed the proxy forwards nothing in either direction and
// closes nothing: the peers see neither data nor an error, only silence,
// so a client waits until its own timeouts end the wait. New connections
// are accepted but stay silent too. Bytes read while black-holed are held
// and delivered when forwarding resumes, as TCP retransmits them after a
// partition heals. All methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	hole   bool
	resume chan struct{} // closed when forwarding resumes
	conns  map[net.Conn]struct{}
	closed bool
	done   chan struct{} // closed by Close

	wg sync.WaitGroup // the accept loop and every pipe
}

// StartProxy listens on a free port of 127.0.0.1 and forwards every
// connection to target, which must be a loopback host:port. The caller
// must Close the proxy; tests should prefer NewProxy.
func StartProxy(target string) (*Proxy, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("testenv: proxy target %q: %w", target, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("testenv: proxy target %q is not a loopback address; the proxy only joins local test servers", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testenv: proxy listen: %w", err)
	}
	p := &Proxy{
		ln:     ln,
		target: target,
		resume: make(chan struct{}),
		conns:  make(map[net.Conn]struct{}),
		done:   make(chan struct{}),
	}
	close(p.resume) // forwarding
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// NewProxy starts a proxy to target for one test and closes it when the
// test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Addr returns the proxy's host:port, for clients to dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole stops forwarding (on) or resumes it (off).
func (p *Proxy) Blackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || on == p.hole {
		return
	}
	p.hole = on
	if on {
		p.resume = make(chan struct{})
	} else {
		close(p.resume)
	}
}

// Close stops listening, closes every connection it forwards, and waits
// for its goroutines to end. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	err := p.ln.Close()
	for c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Add(2)
		go p.pipe(server, client)
		go p.pipe(client, server)
	}
}

// track records a forwarded pair so that Close can close it; it reports
// false (and closes the pair) when the proxy is closed already.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// pipe copies src to dst, holding what it read while black-holed. When
// either side ends, it closes both, so the peer of the other side sees the
// end too.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	defer p.untrack(dst, src)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.open() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// open waits while the proxy is black-holed; it reports false once the
// proxy is closed.
func (p *Proxy) open() bool {
	p.mu.Lock()
	resume := p.resume
	p.mu.Unlock()
	select {
	case <-resume:
		return true
	case <-p.done:
		return false
	}
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	for _, c := range conns {
		delete(p.conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}
