package testenv

import (
	"net"
	"strconv"
	"testing"
)

func TestStartMovesToAnotherPortWhenTaken(t *testing.T) {
	t.Parallel()
	taken, err := pickPort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(taken))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	calls := 0
	r, err := startServer(serverSpec{
		program: "redis-server",
		config:  func(*Redis) ([]string, error) { return dataConfig(RedisOptions{}), nil },
		pick: func() (int, error) {
			calls++
			if calls == 1 {
				return taken, nil
			}
			return pickPort()
		},
	})
	if err != nil {
		t.Fatalf("start with the first port taken: %v", err)
	}
	defer r.Close()
	if r.Port() == taken || calls != 2 {
		t.Fatalf("server on port %d after %d picks; want a second port other than %d", r.Port(), calls, taken)
	}
}
