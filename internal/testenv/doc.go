// Package testenv starts real, private servers for baton's tests: a
// standalone redis-server (Redis), a Sentinel topology (Sentinel), a Redis
// Cluster of masters with or without replicas (Cluster) and a Consul dev
// agent (Consul). baton's adapters are tested against real servers, never
// against mocks.
//
// The consul binary is the server pinned by tools/consul, which `make
// deps` builds into .cache/bin at the top of the checkout; LookPath finds
// it there. A test agent accepts sessions as short as
// DefaultConsulSessionTTLMin, so that leases can run out within a test.
//
// # What it promises
//
//   - Every process listens on 127.0.0.1 only, on a port picked free, with a
//     private temporary directory holding its config file, its log and its
//     data. A port taken between picking and binding is retried on a new
//     port; a Redis keeps its port across Restart.
//   - A start returns only once the server answers PING (and reports the pid
//     testenv started, so a stranger on the port is never mistaken for it).
//     A failed start reports the last lines of the server's output and log.
//   - Every process runs in its own process group and is killed, with any
//     child it forked, by Close. The New* helpers register Close with
//     t.Cleanup, so processes go away when a test fails too. On Linux the
//     kernel also kills them if the test binary dies without cleaning up
//     (for example on a `go test -timeout` abort).
//   - Servers keep no data across Kill or Restart unless
//     RedisOptions.AppendOnly is set (then appendfsync always: every
//     acknowledged write survives SIGKILL).
//   - A missing binary is an error naming `make deps`. Tests never skip for
//     lack of Redis.
//   - Under -short nothing starts: NewRedis, NewSentinel, NewCluster,
//     NewConsul and the shared server's Client skip the test ("real-store
//     tier, run without -short"). That is the short tier (`make
//     test-short`): the unit tests on the memory store and the fake clock,
//     with no server binary at all. `make test` runs without -short.
//
// # What it does not promise
//
// Waiting uses polling with generous deadlines, never sleeps, but a loaded
// machine can still exceed them; the errors then say what was awaited.
// Sentinel's own failure detection runs on wall-clock timers inside
// redis-sentinel, so automatic failovers (after Kill or Pause of a master)
// take about SentinelOptions.DownAfter plus a few seconds; use
// Sentinel.Failover for a prompt, forced one. Cluster.Failover promotes a
// replica with CLUSTER FAILOVER, which waits for the replica to catch up:
// it is the graceful handover, not a crash's. Process control needs a unix
// system.
//
// # Use
//
// One server per test package, shared through TestMain, keeps packages fast;
// each test then uses its own keys or calls FlushAll:
//
//	var srv *testenv.Redis
//
//	func TestMain(m *testing.M) {
//		var err error
//		if srv, err = testenv.StartRedis(testenv.RedisOptions{}); err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		code := m.Run()
//		_ = srv.Close()
//		os.Exit(code)
//	}
//
// Tests that inject faults (Kill, Restart, Pause) start their own with
// NewRedis, NewSentinel or NewCluster.
package testenv
