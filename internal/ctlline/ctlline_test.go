package ctlline

import (
	"slices"
	"testing"
)

// A line written by Redis or Consul reads back as the arguments it
// names, also when a value needs quotes.
func TestRoundTrip(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{Redis("127.0.0.1:6379", "baton-demo", "acme", "billing"),
			[]string{"--redis", "127.0.0.1:6379", "--prefix", "baton-demo", "--tenant", "acme", "--app", "billing", "status"}},
		{Consul("http://127.0.0.1:8500", "it's here", "acme", "my app"),
			[]string{"--consul", "http://127.0.0.1:8500", "--prefix", "it's here", "--tenant", "acme", "--app", "my app", "status"}},
	} {
		got, err := Args("instance 1 started\ninspect it: " + c.line + "\nmore\n")
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Args(%q) = %q, %v; want %q", c.line, got, err, c.want)
		}
	}
	if _, err := Args("nothing here\n"); err == nil {
		t.Error("Args found a line in output without one")
	}
}
