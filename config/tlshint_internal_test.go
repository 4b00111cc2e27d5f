package config

import (
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
)

// A TLS connection that the server closes (with TLS 1.3 a refused client
// certificate can reach the client as a reset or EOF, not as the alert)
// points at the client certificate's keys; a plain one at redis.tls.
func TestTLSHintForAClosedConnection(t *testing.T) {
	for _, c := range []struct {
		err  error
		tls  bool
		want string
	}{
		{fmt.Errorf("write tcp: %w", syscall.ECONNRESET), true, keyRedisTLSCertFile},
		{io.EOF, true, keyRedisTLSCertFile},
		{fmt.Errorf("read tcp: %w", syscall.ECONNRESET), false, keyRedisTLS + ")"},
	} {
		if got := tlsHint(c.err, c.tls); !strings.Contains(got, c.want) {
			t.Errorf("tlsHint(%v, tls %v) = %q; want it to name %s", c.err, c.tls, got, c.want)
		}
	}
}
