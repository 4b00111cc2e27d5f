package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

const (
	// DefaultStartTimeout bounds the wait for a single server to answer PING.
	DefaultStartTimeout = 10 * time.Second

	// startAttempts is how many fresh ports a first start tries when the port
	// it picked is taken before the server could bind it.
	startAttempts = 5

	// stopGrace is how long Stop waits for a clean shutdown before SIGKILL.
	stopGrace = 10 * time.Second
)

var (
	// ErrClosed is returned by methods of a server that has been closed.
	ErrClosed = errors.New("testenv: server closed")
	// ErrNotRunning is returned by Pause and Resume when the process is down.
	ErrNotRunning = errors.New("testenv: server not running")

	// errPortInUse marks a start that failed because the port was taken.
	errPortInUse = errors.New("port already in use")
)

// RedisOptions configures a redis-server. The zero value is a server without
// any persistence: after Kill or Restart it is empty.
type RedisOptions struct {
	// AppendOnly turns on the append-only file with appendfsync always, so
	// every acknowledged write survives Kill and Restart.
	AppendOnly bool

	// Config holds extra redis.conf directives, one per element, for example
	// "maxmemory 64mb" or "requirepass secret". They come after testenv's own
	// directives and so override them.
	Config []string

	// StartTimeout bounds how long a start or restart waits for the server to
	// answer PING. Zero means DefaultStartTimeout.
	StartTimeout time.Duration

	// TLS, when set, makes the server also listen with TLS on a second
	// port (TLSAddr), with the server certificate of TLS. The plain port
	// stays, for testenv's own commands.
	TLS *TLSCerts
	// TLSAuthClients makes the TLS port require a client certificate
	// signed by TLS's CA (mutual TLS).
	TLSAuthClients bool
}

func (o RedisOptions) startTimeout() time.Duration {
	if o.StartTimeout > 0 {
		return o.StartTimeout
	}
	return DefaultStartTimeout
}

// Redis is one private redis-server (or redis-sentinel) process listening on
// 127.0.0.1, with its own temporary directory holding its config file, its
// log and any data files. Its port is fixed for its whole life, across
// Restart. All methods are safe for concurrent use.
type Redis struct {
	program string // "redis-server" or "redis-sentinel"
	bin     string
	conf    string
	logPath string
	outPath string
	port    int
	busPort int // cluster bus port, 0 outside cluster mode
	tlsPort int // RedisOptions.TLS's port, 0 without TLS
	timeout time.Duration
	// unstarted marks the shared server of MainWithRedis under -short:
	// never started, its Client skips the test.
	unstarted bool

	process
}

// serverSpec describes how to start one process.
type serverSpec struct {
	program string
	opts    RedisOptions
	// config returns the directives specific to this server. r.port is set;
	// config may reserve more ports (r.busPort).
	config func(r *Redis) ([]string, error)
	// pick returns a candidate port; nil means pickPort.
	pick func() (int, error)
}

// StartRedis starts a standalone redis-server on a free loopback port and
// waits until it answers PING. The caller must Close it. It is meant for
// TestMain, where one server serves a whole test package; tests should
// prefer NewRedis.
func StartRedis(opts RedisOptions) (*Redis, error) {
	return startServer(serverSpec{
		program: "redis-server",
		opts:    opts,
		config:  func(*Redis) ([]string, error) { return dataConfig(opts), nil },
	})
}

// NewRedis starts a standalone redis-server for one test and closes it when
// the test ends. It fails t when the server cannot start (it never skips:
// a missing redis-server is an error that names `make deps`). At most one
// RedisOptions may be given. When the test fails, the last lines of the
// server's log are logged before it is removed.
func NewRedis(t testing.TB, opts ...RedisOptions) *Redis {
	t.Helper()
	skipShort(t, "redis-server")
	r, err := StartRedis(single(t, opts))
	if err != nil {
		t.Fatal(err)
	}
	cleanupServer(t, r)
	return r
}

// dataConfig returns the directives of a data-holding redis-server.
func dataConfig(opts RedisOptions) []string {
	lines := []string{
		`save ""`,
		"repl-diskless-sync-delay 0",
		"enable-debug-command local",
	}
	if opts.AppendOnly {
		lines = append(lines, "appendonly yes", "appendfsync always")
	} else {
		lines = append(lines, "appendonly no")
	}
	return lines
}

// startServer creates the directory and config of a new server and starts
// it, moving to a fresh port when the picked one turns out to be taken.
func startServer(spec serverSpec) (*Redis, error) {
	bin, err := LookPath(spec.program)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "baton-"+spec.program+"-")
	if err != nil {
		return nil, fmt.Errorf("testenv: create directory: %w", err)
	}
	r := &Redis{
		program: spec.program,
		bin:     bin,
		process: process{dir: dir},
		conf:    filepath.Join(dir, spec.program+".conf"),
		logPath: filepath.Join(dir, spec.program+".log"),
		outPath: filepath.Join(dir, spec.program+".out"),
		timeout: spec.opts.startTimeout(),
	}
	pick := spec.pick
	if pick == nil {
		pick = pickPort
	}
	for range startAttempts {
		if r.port, err = pick(); err != nil {
			break
		}
		if err = r.writeConfig(spec); err != nil {
			break
		}
		if err = r.launch(); err == nil {
			return r, nil
		}
		if !errors.Is(err, errPortInUse) {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, err
}

func (r *Redis) writeConfig(spec serverSpec) error {
	own, err := spec.config(r)
	if err != nil {
		return err
	}
	lines := []string{
		"# written by baton internal/testenv",
		"port " + strconv.Itoa(r.port),
		"bind 127.0.0.1",
		"protected-mode no",
		"daemonize no",
		"dir " + strconv.Quote(r.dir),
		"logfile " + strconv.Quote(r.logPath),
		"loglevel notice",
	}
	lines = append(lines, own...)
	if c := spec.opts.TLS; c != nil {
		if r.tlsPort, err = pickPort(); err != nil {
			return err
		}
		auth := "no"
		if spec.opts.TLSAuthClients {
			auth = "yes"
		}
		lines = append(lines,
			"tls-port "+strconv.Itoa(r.tlsPort),
			"tls-cert-file "+strconv.Quote(c.ServerCert),
			"tls-key-file "+strconv.Quote(c.ServerKey),
			"tls-ca-cert-file "+strconv.Quote(c.CAFile),
			"tls-auth-clients "+auth)
	}
	lines = append(lines, spec.opts.Config...)
	if err := os.WriteFile(r.conf, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("testenv: write %s: %w", r.conf, err)
	}
	return nil
}

// launch starts the process from the existing config file and waits until
// it answers PING. The caller holds r.mu or owns r exclusively.
func (r *Redis) launch() error {
	logOff, outOff := fileSize(r.logPath), fileSize(r.outPath)
	p, err := startProc(r.bin, []string{r.conf}, r.dir, r.outPath)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	if err := waitReady(ctx, r.Addr(), p); err != nil {
		_ = p.kill()
		out := readTail(r.outPath, outOff, 20) + readTail(r.logPath, logOff, 20)
		err = fmt.Errorf("testenv: %s on %s did not start: %w\n--- last lines of %s and %s ---\n%s",
			r.program, r.Addr(), err, filepath.Base(r.outPath), r.logPath, out)
		if strings.Contains(out, "Address already in use") {
			err = fmt.Errorf("%w: %w", errPortInUse, err)
		}
		return err
	}
	r.p = p
	return nil
}

// waitReady polls the server until it answers PING and reports the pid of
// p, so that another server that happens to own the port is not mistaken for
// ours.
func waitReady(ctx context.Context, addr string, p *proc) error {
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("process exited before answering PING (%v)", p.err)
		}
		pid, err := probe(ctx, addr, 250*time.Millisecond)
		switch {
		case err != nil:
			last = err
		case pid != 0 && pid != p.pid():
			last = fmt.Errorf("%s is served by process %d, not by ours (%d)", addr, pid, p.pid())
		default:
			return nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("no PING reply in time: %w", errors.Join(last, ctx.Err()))
		case <-p.done:
			t.Stop()
		case <-t.C:
		}
	}
}

// Addr returns "127.0.0.1:port".
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// TLSAddr returns the address of the server's TLS port (RedisOptions.TLS),
// or "" without one.
func (r *Redis) TLSAddr() string {
	if r.tlsPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.tlsPort))
}

// Port returns the TCP port, the same across Restart.
func (r *Redis) Port() int { return r.port }

// linkPort is the port the other servers of a topology reach r on: its
// TLS port when it has one (replication and sentinels then speak TLS),
// else its port.
func (r *Redis) linkPort() int {
	if r.tlsPort != 0 {
		return r.tlsPort
	}
	return r.port
}

// linkAddr is linkPort's address.
func (r *Redis) linkAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.linkPort())) }

// Dir returns the server's private directory (config, log, data files).
func (r *Redis) Dir() string { return r.dir }

// LogPath returns the path of the server's log file.
func (r *Redis) LogPath() string { return r.logPath }

// Running reports whether the process is alive (it may be paused).
func (r *Redis) Running() bool { return r.PID() != 0 }

// Options returns fresh go-redis options that reach this server, otherwise
// go-redis's defaults (note that these ignore context deadlines for reads
// unless ContextTimeoutEnabled is set, which matters against a paused server).
func (r *Redis) Options() *redis.Options {
	return &redis.Options{Addr: r.Addr()}
}

// Client returns a new go-redis client for this server, closed when t ends.
// On the shared server MainWithRedis did not start (under -short) it skips
// t.
func (r *Redis) Client(t testing.TB) *redis.Client {
	t.Helper()
	if r.unstarted {
		skipShort(t, r.program)
	}
	c := redis.NewClient(r.Options())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// adminClient returns a client for testenv's own commands. The caller
// closes it.
func (r *Redis) adminClient() *redis.Client { return redis.NewClient(r.adminOptions()) }

// adminOptions are the client options of testenv's own commands: RESP2, no
// retries (callers poll), one connection, no optional handshakes.
func (r *Redis) adminOptions() *redis.Options {
	return &redis.Options{
		Addr:                     r.Addr(),
		Protocol:                 2,
		DisableIdentity:          true,
		MaxRetries:               -1,
		DialTimeout:              time.Second,
		ReadTimeout:              2 * time.Second,
		WriteTimeout:             2 * time.Second,
		ContextTimeoutEnabled:    true,
		PoolSize:                 1,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// FlushAll deletes every key in every database of the server.
func (r *Redis) FlushAll(ctx context.Context) error {
	c := r.adminClient()
	defer c.Close()
	if err := c.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("testenv: FLUSHALL on %s: %w", r.Addr(), err)
	}
	return nil
}

// Kill sends SIGKILL to the server (and any child it forked) and waits for
// it to exit. Without AppendOnly its data is gone. Killing a server that is
// down is a no-op.
func (r *Redis) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.killLocked()
}

// Stop shuts the server down cleanly (SIGTERM, resuming it first if it is
// paused) and waits for it to exit, falling back to SIGKILL after 10 s. The
// directory is kept, so Restart can bring it back.
func (r *Redis) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stopLocked()
}

// Restart starts the server again on the same port with the same config
// file, stopping it cleanly first if it is running. Its data is empty unless
// the server was started with AppendOnly. A restarted sentinel or cluster
// node keeps the state it wrote to its config file.
//
// If the port was taken while the server was down, Restart retries until the
// start timeout passes.
func (r *Redis) Restart() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if err := r.stopLocked(); err != nil {
		return err
	}
	return r.relaunchLocked(r.timeout, r.launch)
}

// Pause freezes the server with SIGSTOP: connections stay open but nothing
// is answered, as with a long GC pause or a hung host. It returns once the
// kernel has stopped the process (see WaitStopped).
func (r *Redis) Pause() error {
	if err := r.signal(sigStop, r.program+" "+r.Addr()); err != nil {
		return err
	}
	return WaitStopped(r.PID(), 10*time.Second)
}

// RestartEmpty kills the server with SIGKILL, deletes its data files (the
// append-only file and any snapshot), and starts it again on the same
// port: a host that came back without its disk. A server started without
// AppendOnly loses its data on any restart; this one loses it also with.
func (r *Redis) RestartEmpty() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if err := r.killLocked(); err != nil {
		return err
	}
	for _, name := range []string{"appendonlydir", "appendonly.aof", "dump.rdb"} {
		if err := os.RemoveAll(filepath.Join(r.dir, name)); err != nil {
			return fmt.Errorf("testenv: remove data of %s: %w", r.Addr(), err)
		}
	}
	return r.relaunchLocked(r.timeout, r.launch)
}

// Resume continues a paused server with SIGCONT.
func (r *Redis) Resume() error { return r.signal(sigCont, r.program+" "+r.Addr()) }

// Close kills the server and removes its directory. It is idempotent.
func (r *Redis) Close() error { return r.close() }

// LogTail returns the last n lines of the server's log file.
func (r *Redis) LogTail(n int) string { return readTail(r.logPath, 0, n) }

// cleanupServer registers Close on t, logging the server's last log lines
// first when t failed.
func cleanupServer(t testing.TB, servers ...*Redis) {
	t.Cleanup(func() {
		for _, r := range servers {
			if t.Failed() {
				t.Logf("testenv: last lines of %s (%s):\n%s", r.LogPath(), r.Addr(), r.LogTail(30))
			}
			if err := r.Close(); err != nil {
				t.Errorf("testenv: close %s %s: %v", r.program, r.Addr(), err)
			}
		}
	})
}

// single returns the only element of opts, or the zero value.
func single[T any](t testing.TB, opts []T) T {
	t.Helper()
	var zero T
	switch len(opts) {
	case 0:
		return zero
	case 1:
		return opts[0]
	default:
		t.Fatalf("testenv: at most one options value, got %d", len(opts))
		return zero
	}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readTail returns the last n lines of path written after offset, or a note
// that there are none.
func readTail(path string, offset int64, n int) string {
	const maxRead = 64 << 10
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if size := fileSize(path); size-offset > maxRead {
		offset = size - maxRead
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, maxRead))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}
