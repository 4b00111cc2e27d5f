package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// handedOut remembers every port this process has given to a server, so two
// servers started by one test binary never race for the same number. Ports
// are never given back: a test binary lives briefly and Restart must be able
// to reuse its port.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// lowestPort is the bottom of the range free ports are drawn from.
const lowestPort = 20000

// pickPort returns a loopback TCP port that nobody listens on right now.
//
// It prefers ports below the kernel's ephemeral range: a port from that range
// can be taken by any outgoing connection between Kill and Restart, while a
// port below it can only be taken by another program binding it explicitly.
// The port may still be taken before the server binds it; callers retry.
func pickPort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()

	if hi := ephemeralLow(); hi-lowestPort >= 1000 {
		for range 200 {
			p := lowestPort + rand.IntN(hi-lowestPort)
			if handedOut.ports[p] || !canListen(p) {
				continue
			}
			handedOut.ports[p] = true
			return p, nil
		}
	}
	// Fall back to letting the kernel choose.
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("testenv: pick a free port: %w", err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !handedOut.ports[p] {
			handedOut.ports[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("testenv: no free loopback port found")
}

func canListen(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// ephemeralLow returns the first port of the kernel's ephemeral range, or 0
// when it cannot be read (non-Linux systems).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo > 65535 {
		return 0
	}
	return lo
}
