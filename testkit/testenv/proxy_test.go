package testenv_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/baton-go/baton/testkit/testenv"
)

// echoServer answers every line with the same line until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, line string, wait time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(wait)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	got, err := r.ReadString('\n')
	if len(got) > 0 {
		got = got[:len(got)-1]
	}
	return got, err
}

func TestProxyForwardsAndBlackholes(t *testing.T) {
	p := testenv.NewProxy(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if got, err := roundTrip(c, r, "one", 10*time.Second); err != nil || got != "one" {
		t.Fatalf("through the proxy: %q, %v; want the echo", got, err)
	}

	p.Blackhole(true)
	// Silence, not an error: the read runs into the client's own deadline.
	if got, err := roundTrip(c, r, "two", 200*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("black-holed: %q, %v; want the client's deadline to end the wait", got, err)
	}
	p.Blackhole(false)
	// What was sent into the hole arrives once it heals, then the rest.
	if got, err := roundTrip(c, r, "three", 10*time.Second); err != nil || got != "two" {
		t.Fatalf("after healing: %q, %v; want the held line first", got, err)
	}
	if got, err := r.ReadString('\n'); err != nil || got != "three\n" {
		t.Fatalf("after healing: %q, %v; want the next line", got, err)
	}

	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a connection through a closed proxy stays open")
	}
}

func TestProxyRefusesNonLoopbackTarget(t *testing.T) {
	if p, err := testenv.StartProxy("192.0.2.1:6379"); err == nil {
		p.Close()
		t.Fatal("a proxy to a non-loopback address started")
	}
}
