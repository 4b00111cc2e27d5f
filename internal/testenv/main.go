package testenv

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// MainWithRedis is a TestMain for packages whose tests share one private
// redis-server: it starts the server, stores it in *server, runs the
// tests, stops the server, checks that no goroutine leaked, and exits.
// A server that cannot start fails the package with the reason. A fuzzing
// worker, which go test -fuzz starts to run the fuzz target alone and
// never a test, starts no server: fuzz targets need none. Under -short no
// server starts either: *server is a Redis whose Client skips the test
// that asks for it (the real-store tier), and the package's other tests
// run.
func MainWithRedis(m *testing.M, server **Redis) {
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	if testing.Short() {
		*server = &Redis{program: "redis-server", unstarted: true}
		os.Exit(verifyNoLeaks(m.Run()))
	}
	r, err := StartRedis(RedisOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	*server = r
	code := m.Run()
	r.Close()
	os.Exit(verifyNoLeaks(code))
}

// verifyNoLeaks returns code, or 1 when the tests passed but left a
// goroutine running.
func verifyNoLeaks(code int) int {
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}
