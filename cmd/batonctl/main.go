package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/config"
)

// Exit codes (see the package documentation).
const (
	exitOK      = 0 // done
	exitError   = 1 // the store or the configuration failed
	exitUsage   = 2 // the command line is wrong
	exitNo      = 3 // the answer is no: no master, a refused or declined release, a free key
	exitChanged = 4 // release: the key changed hands after it was shown; nothing released
)

func main() {
	quietRedis()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// quietRedis keeps go-redis's own log lines (a failed dial, retried)
// off stderr: batonctl reports the error that ends a command, with the
// address, once.
func quietRedis() { redis.SetLogger(discardLogger{}) }

type discardLogger struct{}

func (discardLogger) Printf(context.Context, string, ...any) {}

// options are the command line's flags.
type options struct {
	configFile string
	app        string
	tenant     string
	backend    string
	redis      string // --redis: redis.addrs, comma-separated
	consul     string // --consul: consul.address
	prefix     string // --prefix: the store's key prefix
	output     string
	yes        bool
	force      bool
	timeout    time.Duration
	timeoutSet bool // --timeout was given: it sets the Redis client's timeouts too
	interval   time.Duration
}

// defaultTimeout is --timeout's default: the Redis client's own dial and
// read timeouts (config.DefaultDialTimeout, config.DefaultReadTimeout),
// so that a server that does not answer fails after it, whichever of the
// two bounds the wait.
const defaultTimeout = 5 * time.Second

// usageError is a wrong command line (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// noError is a "no" answer (exit 3): the message says what was not so.
type noError struct{ msg string }

func (e *noError) Error() string { return e.msg }

func nof(format string, args ...any) error {
	return &noError{msg: fmt.Sprintf(format, args...)}
}

// changedError is a release that found another holder than the one it
// showed (exit 4).
type changedError struct{ msg string }

func (e *changedError) Error() string { return e.msg }

func changedf(format string, args ...any) error {
	return &changedError{msg: fmt.Sprintf(format, args...)}
}

// run runs batonctl with args (without the program name) and returns its
// exit code. Results go to stdout, messages and prompts to stderr; a
// confirmation is read from stdin. ctx ends watch.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := runErr(ctx, args, stdin, stdout, stderr)
	var ue *usageError
	var ne *noError
	var ce *changedError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "batonctl: %v\nRun 'batonctl help' for usage.\n", err)
		return exitUsage
	case errors.As(err, &ne):
		fmt.Fprintf(stderr, "batonctl: %v\n", err)
		return exitNo
	case errors.As(err, &ce):
		fmt.Fprintf(stderr, "batonctl: %v\n", err)
		return exitChanged
	}
	fmt.Fprintf(stderr, "batonctl: %v\n", err)
	return exitError
}

func runErr(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var o options
	fs := flag.NewFlagSet("batonctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.configFile, "config", "", "configuration `file` (.yaml, .yml, .json, .toml, .properties)")
	fs.StringVar(&o.app, "app", "", "the service's `name` (overrides instance.app)")
	fs.StringVar(&o.tenant, "tenant", "", "the `tenant` (overrides instance.tenant)")
	fs.StringVar(&o.backend, "backend", "", "the store: redis or consul (default: redis with --redis, consul with --consul; else consul when the configuration sets consul.address and not redis.addrs, else redis)")
	fs.StringVar(&o.redis, "redis", "", "the Redis server's `host:port`, several comma-separated for a Cluster or Sentinel (sets redis.addrs)")
	fs.StringVar(&o.consul, "consul", "", "the Consul agent's `address`, host:port or a URL (sets consul.address; the store is Consul)")
	fs.StringVar(&o.prefix, "prefix", "", "the store's key `prefix` (sets redis.key-prefix or consul.key-prefix; default "+config.DefaultKeyPrefix+")")
	fs.StringVar(&o.output, "output", "table", "output `format`: table or json")
	fs.BoolVar(&o.yes, "yes", false, "do not ask for confirmation (release, init)")
	fs.BoolVar(&o.force, "force", false, "allow release to end a lease its holder did not release")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "longest wait for the store, per request; when given, it also sets the Redis client's dial, read and write timeouts (whose default is 5s too)")
	fs.DurationVar(&o.interval, "interval", time.Second, "watch: how often to look when no event comes")
	pos, err := parseArgs(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout, fs)
		return err
	}
	if err != nil {
		return usagef("%v", err)
	}
	fs.Visit(func(f *flag.Flag) { o.timeoutSet = o.timeoutSet || f.Name == "timeout" })
	if len(pos) == 0 {
		return usagef("no command given")
	}
	name, rest := pos[0], pos[1:]
	if name == "help" {
		usage(stdout, fs)
		return nil
	}
	if err := o.check(); err != nil {
		return err
	}
	if name == "functions" {
		return functions(ctx, o, rest, stdout)
	}
	cmd, ok := commands[name]
	if !ok {
		return usagef("unknown command %q%s (commands: %s)", name, didYouMean(name), strings.Join(commandNames(), ", "))
	}
	if len(rest) < cmd.minArgs || len(rest) > cmd.maxArgs {
		return usagef("usage: batonctl [flags] %s", cmd.usage)
	}
	s, err := open(ctx, o)
	if err != nil {
		return err
	}
	defer s.close()
	s.stdin, s.stdout, s.stderr = stdin, stdout, stderr
	return cmd.run(ctx, s, rest)
}

// check checks the flags that do not depend on the command, and sets
// o.backend from --redis or --consul.
func (o *options) check() error {
	if o.output != "table" && o.output != "json" {
		return usagef("--output %q: want table or json", o.output)
	}
	if o.backend != "" && o.backend != "redis" && o.backend != "consul" {
		return usagef("--backend %q: want redis or consul", o.backend)
	}
	switch {
	case o.redis != "" && o.consul != "":
		return usagef("--redis and --consul: pass one, the store to look at")
	case o.redis != "" && o.backend == "consul", o.consul != "" && o.backend == "redis":
		return usagef("--backend %s does not go with --redis or --consul: pass the address of the store you name", o.backend)
	case o.redis != "":
		o.backend = "redis"
	case o.consul != "":
		o.backend = "consul"
	}
	if o.timeout <= 0 || o.interval <= 0 {
		return usagef("--timeout and --interval must be positive")
	}
	return nil
}

// parseArgs parses flags before, between and after the positional
// arguments, and returns the positional ones.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// command is one of batonctl's commands.
type command struct {
	usage            string
	minArgs, maxArgs int
	run              func(ctx context.Context, s *session, args []string) error
}

var commands = map[string]command{
	"status":  {usage: "status", run: status},
	"members": {usage: "members", run: members},
	"master":  {usage: "master", run: master},
	"locks":   {usage: "locks [PREFIX]", maxArgs: 1, run: locks},
	"release": {usage: "release KEY", minArgs: 1, maxArgs: 1, run: release},
	"watch":   {usage: "watch [KEY]", maxArgs: 1, run: watch},
	"init":    {usage: "init", run: initStore},
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `Usage: batonctl [flags] COMMAND [ARGS]

Commands:
  status          the service's master (epoch, lease left), members and locks held
  members         the live instances of the service
  master          the master's instance ID and epoch; exit 3 when there is none
  locks [PREFIX]  the leases held under the service's keys (KEY starting with PREFIX)
  release KEY     end the lease on KEY whoever holds it (needs --force; asks unless --yes)
  watch [KEY]     print every change of holder of KEY (default: the role) until interrupted
  init            declare a store that holds no live lease (a new one) whole, so that the
                  tenant's first grants skip the restart guard's wait (asks unless --yes)
  functions       print baton's Redis function library (for redis.functions)
  functions load  load it into the configured Redis (every master of a Cluster)

KEY is a full key such as {tenant:app}:lock:nightly, the store key the output
shows (baton:{tenant:app}:lock:nightly on Redis), or the part after
{tenant:app}: of the service's keys (lock:nightly, job:report, role).

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	fmt.Fprint(w, `
Configuration: --config FILE, then the BATON_* environment variables, then
--app, --tenant, --redis, --consul and --prefix, as the library reads it
(package config). Without a file:
  batonctl --redis 127.0.0.1:6379 --prefix baton --tenant acme --app billing status

Exit codes: 0 done; 1 error (store unreachable, bad configuration);
2 wrong command line; 3 no (no master, release refused or declined, key free);
4 release ended nothing: the key changed hands after it was shown.
`)
}

// session is what a command works with: the service, the store and the
// output.
type session struct {
	o        options
	cfg      *config.Config
	tenant   string
	app      string
	store    backend.Store
	kind     string // "redis", "redis (spring layout)" or "consul"
	where    string // the store's address, for messages
	closeAll func() error

	stdin          io.Reader
	stdout, stderr io.Writer
}

func (s *session) close() {
	if s.closeAll != nil {
		_ = s.closeAll()
	}
}

// json reports whether the output is JSON.
func (s *session) json() bool { return s.o.output == "json" }

// call returns a context for one request to the store, bounded by
// --timeout.
func (s *session) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.o.timeout)
}

// key returns the full key that arg names: arg itself when it has a hash
// tag, the key a store key holds (baton:{tenant:app}:lock:x on Redis,
// as the output shows it), else the service's key arg
// ({tenant:app}:arg).
func (s *session) key(arg string) string {
	if !strings.Contains(arg, "{") {
		return backend.AppKey(s.tenant, s.app, arg)
	}
	return s.unstore(arg)
}

// unstore returns the key that the store key k holds when k is one of
// the store's keys (or the start of one), else k.
func (s *session) unstore(k string) string {
	if i := strings.IndexByte(k, '{'); i > 0 && s.storeKey(k[i:]) == k {
		return k[i:]
	}
	return k
}

// roleKey is the service's role key.
func (s *session) roleKey() string { return backend.AppKey(s.tenant, s.app, "role") }

// service names the service in messages: tenant/app.
func (s *session) service() string { return s.tenant + "/" + s.app }
