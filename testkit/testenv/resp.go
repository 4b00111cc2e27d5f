package testenv

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// probe is testenv's readiness check. It speaks just enough RESP to send
// PING and INFO server on a fresh connection, so that waiting for a server
// needs no client library and leaves no pooled connection behind.
//
// It returns the server's process id as reported by INFO, or 0 when the
// server requires a password (it is then up, but cannot be asked).
func probe(ctx context.Context, addr string, timeout time.Duration) (int, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return 0, err
	}
	rd := bufio.NewReader(conn)

	reply, err := roundTrip(conn, rd, "PING")
	if err != nil {
		return 0, err
	}
	switch {
	case reply == "PONG":
	case strings.HasPrefix(reply, "NOAUTH"):
		return 0, nil
	default:
		return 0, fmt.Errorf("PING answered %q", reply)
	}

	info, err := roundTrip(conn, rd, "INFO", "server")
	if err != nil {
		return 0, err
	}
	pid, ok := parseFields(info)["process_id"]
	if !ok {
		return 0, errors.New("INFO server has no process_id")
	}
	return strconv.Atoi(pid)
}

// roundTrip sends one command and reads one reply: a simple string, an
// error (returned as its text, since callers look at it) or a bulk string.
func roundTrip(conn net.Conn, rd *bufio.Reader, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', '-', ':':
		return line[1:], nil
	case '$', '=':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk header %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
}
