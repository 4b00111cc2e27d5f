package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// DefaultConsulStartTimeout bounds the wait for a Consul dev agent to elect
// itself leader and accept sessions. A dev agent is ready in about a
// second; a loaded machine needs more.
const DefaultConsulStartTimeout = 60 * time.Second

// DefaultConsulSessionTTLMin is the session_ttl_min the test agents run
// with: the shortest session TTL they accept. Production servers keep
// Consul's 10 s; tests lower it so that leases can run out in a test.
const DefaultConsulSessionTTLMin = 50 * time.Millisecond

// ConsulOptions configures a Consul dev agent. The zero value is a dev
// agent that keeps its data in memory (empty after Kill or Restart), with
// ACLs off and session_ttl_min DefaultConsulSessionTTLMin.
type ConsulOptions struct {
	// SessionTTLMin is the shortest session TTL the agent accepts. Zero
	// means DefaultConsulSessionTTLMin.
	SessionTTLMin time.Duration

	// ACLMasterToken, if set, turns ACLs on with default policy deny and
	// makes this the initial management token: requests without it (or a
	// token it created) are refused.
	ACLMasterToken string

	// HCL holds extra agent configuration, one HCL statement per element,
	// for example `log_level = "debug"`. They are written after testenv's
	// own settings.
	HCL []string

	// StartTimeout bounds how long a start or restart waits for the agent.
	// Zero means DefaultConsulStartTimeout.
	StartTimeout time.Duration
}

// Consul is one private `consul agent -dev` process: a single server that
// is its own leader, listening on 127.0.0.1 only, with HTTP, server RPC and
// Serf LAN on free ports (gRPC, DNS and Serf WAN off). Its HTTP port is
// fixed for its whole life, across Restart. All methods are safe for
// concurrent use.
type Consul struct {
	bin     string
	conf    string
	outPath string
	opts    ConsulOptions
	port    int // HTTP
	rpcPort int
	lanPort int

	process
}

// StartConsul starts a Consul dev agent and waits until it is leader and
// accepts sessions. The caller must Close it. Tests should prefer
// NewConsul; StartConsul is for TestMain and programs.
func StartConsul(opts ConsulOptions) (*Consul, error) {
	bin, err := LookPath("consul")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "baton-consul-")
	if err != nil {
		return nil, fmt.Errorf("testenv: create directory: %w", err)
	}
	c := &Consul{
		bin:     bin,
		process: process{dir: dir},
		conf:    filepath.Join(dir, "agent.hcl"),
		outPath: filepath.Join(dir, "consul.out"),
		opts:    opts,
	}
	for range startAttempts {
		if err = c.pickPorts(); err != nil {
			break
		}
		if err = c.writeConfig(); err != nil {
			break
		}
		if err = c.launch(); err == nil {
			return c, nil
		}
		if !errors.Is(err, errPortInUse) {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, err
}

// NewConsul starts a Consul dev agent for one test and closes it when the
// test ends. It fails t when the agent cannot start (a missing consul
// binary is an error that names `make deps`). At most one ConsulOptions may
// be given. When the test fails, the last lines of the agent's output are
// logged before it is removed.
func NewConsul(t testing.TB, opts ...ConsulOptions) *Consul {
	t.Helper()
	skipShort(t, "consul")
	c, err := StartConsul(single(t, opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("testenv: last lines of %s (%s):\n%s", c.outPath, c.Addr(), c.LogTail(30))
		}
		if err := c.Close(); err != nil {
			t.Errorf("testenv: close consul %s: %v", c.Addr(), err)
		}
	})
	return c
}

func (c *Consul) pickPorts() error {
	for _, p := range []*int{&c.port, &c.rpcPort, &c.lanPort} {
		port, err := pickPort()
		if err != nil {
			return err
		}
		*p = port
	}
	return nil
}

func (c *Consul) sessionTTLMin() time.Duration {
	if c.opts.SessionTTLMin > 0 {
		return c.opts.SessionTTLMin
	}
	return DefaultConsulSessionTTLMin
}

func (c *Consul) startTimeout() time.Duration {
	if c.opts.StartTimeout > 0 {
		return c.opts.StartTimeout
	}
	return DefaultConsulStartTimeout
}

func (c *Consul) writeConfig() error {
	lines := []string{
		"# written by baton internal/testenv",
		`node_name = "baton-test"`,
		`bind_addr = "127.0.0.1"`,
		`client_addr = "127.0.0.1"`,
		`advertise_addr = "127.0.0.1"`,
		`log_level = "warn"`,
		`disable_update_check = true`,
		fmt.Sprintf(`session_ttl_min = "%s"`, c.sessionTTLMin()),
		// Every test client comes from 127.0.0.1, and each watch holds
		// a connection: lift the per-IP cap of 200.
		`limits { http_max_conns_per_client = 10000 }`,
		fmt.Sprintf("ports { http = %d, server = %d, serf_lan = %d, serf_wan = -1, dns = -1, grpc = -1, grpc_tls = -1 }",
			c.port, c.rpcPort, c.lanPort),
	}
	if tok := c.opts.ACLMasterToken; tok != "" {
		lines = append(lines, fmt.Sprintf(`acl { enabled = true, default_policy = "deny", tokens { initial_management = %q, agent = %q } }`, tok, tok))
	}
	lines = append(lines, c.opts.HCL...)
	if err := os.WriteFile(c.conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("testenv: write %s: %w", c.conf, err)
	}
	return nil
}

// launch starts the agent and waits until it is ready. The caller holds
// c.mu or owns c exclusively.
func (c *Consul) launch() error {
	outOff := fileSize(c.outPath)
	p, err := startProc(c.bin, []string{"agent", "-dev", "-config-file", c.conf}, c.dir, c.outPath)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.startTimeout())
	defer cancel()
	if err := c.waitReady(ctx, p); err != nil {
		_ = p.kill()
		out := readTail(c.outPath, outOff, 30)
		err = fmt.Errorf("testenv: consul agent on %s did not start: %w\n--- last lines of %s ---\n%s",
			c.Addr(), err, c.outPath, out)
		if strings.Contains(out, "address already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return err
	}
	c.p = p
	return nil
}

// waitReady polls the agent until it has a leader and accepts a session
// (which needs the node registered with a passing serfHealth check), so
// that the first test request cannot meet a half-started agent.
func (c *Consul) waitReady(ctx context.Context, p *proc) error {
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("process exited before it was ready (%v)", p.err)
		}
		if last = c.tryReady(ctx); last == nil {
			return nil
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("not ready in time: %w", errors.Join(last, ctx.Err()))
		case <-p.done:
			t.Stop()
		case <-t.C:
		}
	}
}

func (c *Consul) tryReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var leader string
	if err := c.do(ctx, http.MethodGet, "/v1/status/leader", nil, &leader); err != nil {
		return err
	}
	if leader == "" {
		return errors.New("no leader yet")
	}
	var created struct{ ID string }
	if err := c.do(ctx, http.MethodPut, "/v1/session/create", map[string]any{"TTL": "10s"}, &created); err != nil {
		return fmt.Errorf("session create: %w", err)
	}
	return c.do(ctx, http.MethodPut, "/v1/session/destroy/"+created.ID, nil, nil)
}

// do sends one request to the agent's HTTP API with the management token,
// if any, and decodes a JSON reply into out (unless out is nil).
func (c *Consul) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.Addr()+path, rd)
	if err != nil {
		return err
	}
	if tok := c.opts.ACLMasterToken; tok != "" {
		req.Header.Set("X-Consul-Token", tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// Addr returns the agent's HTTP address, "127.0.0.1:port".
func (c *Consul) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)) }

// Port returns the HTTP port, the same across Restart.
func (c *Consul) Port() int { return c.port }

// SessionTTLMin returns the shortest session TTL the agent accepts.
func (c *Consul) SessionTTLMin() time.Duration { return c.sessionTTLMin() }

// ManagementToken returns the ACL management token, or "" with ACLs off.
func (c *Consul) ManagementToken() string { return c.opts.ACLMasterToken }

// DeleteAll deletes every key of the KV store and destroys every session:
// the agent's data is gone, which it cannot tell from a fresh start.
func (c *Consul) DeleteAll(ctx context.Context) error {
	var sessions []struct{ ID string }
	if err := c.do(ctx, http.MethodGet, "/v1/session/list", nil, &sessions); err != nil {
		return fmt.Errorf("testenv: list sessions on %s: %w", c.Addr(), err)
	}
	for _, s := range sessions {
		if err := c.do(ctx, http.MethodPut, "/v1/session/destroy/"+s.ID, nil, nil); err != nil {
			return fmt.Errorf("testenv: destroy session %s on %s: %w", s.ID, c.Addr(), err)
		}
	}
	if err := c.do(ctx, http.MethodDelete, "/v1/kv/?recurse=true", nil, nil); err != nil {
		return fmt.Errorf("testenv: delete all keys on %s: %w", c.Addr(), err)
	}
	return nil
}

// DestroySession destroys one session, as `consul session destroy` would.
func (c *Consul) DestroySession(ctx context.Context, id string) error {
	if err := c.do(ctx, http.MethodPut, "/v1/session/destroy/"+id, nil, nil); err != nil {
		return fmt.Errorf("testenv: destroy session %s on %s: %w", id, c.Addr(), err)
	}
	return nil
}

// Kill sends SIGKILL to the agent and waits for it to exit. A dev agent
// keeps its data in memory: it is gone. Killing an agent that is down is a
// no-op.
func (c *Consul) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.killLocked()
}

// Restart stops the agent (SIGTERM, then SIGKILL after 10 s) and starts it
// again on the same ports, empty: a dev agent keeps nothing across a
// restart.
func (c *Consul) Restart() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if err := c.stopLocked(); err != nil {
		return err
	}
	return c.relaunchLocked(c.startTimeout(), c.launch)
}

// RestartEmpty is Restart: a dev agent keeps no data across a restart,
// so it always comes back empty (the name matches Redis.RestartEmpty).
func (c *Consul) RestartEmpty() error { return c.Restart() }

// Pause freezes the agent with SIGSTOP and returns once the kernel has
// stopped it; Resume continues it.
func (c *Consul) Pause() error {
	if err := c.signal(sigStop, "consul "+c.Addr()); err != nil {
		return err
	}
	return WaitStopped(c.PID(), 10*time.Second)
}

// Resume continues a paused agent with SIGCONT.
func (c *Consul) Resume() error { return c.signal(sigCont, "consul "+c.Addr()) }

// Close kills the agent and removes its directory. It is idempotent.
func (c *Consul) Close() error { return c.close() }

// LogTail returns the last n lines of the agent's output.
func (c *Consul) LogTail(n int) string { return readTail(c.outPath, 0, n) }
