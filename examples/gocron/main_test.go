package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/internal/ctlline"
	"github.com/baton-go/baton/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo on the embedded Redis and on a real redis-server: the master
// runs report and the slaves skip it, the slaves run warm and the master
// skips it, export runs under the job lock while the others are skipped
// as locked, and after the first master stops, another instance runs
// report under a larger epoch.
func TestDemo(t *testing.T) {
	ctl := testenv.Batonctl(t)
	for name, addr := range map[string]func(t *testing.T) string{
		"Embedded": func(*testing.T) string { return "" },
		"Redis":    func(t *testing.T) string { return testenv.NewRedis(t).Addr() },
	} {
		t.Run(name, func(t *testing.T) {
			var out testenv.SyncBuffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- run(ctx, addr(t), 4*time.Second, &out) }()
			checkBatonctl(t, ctl, &out, done)
			if err := <-done; err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			text := out.String()
			for _, want := range []string{
				`report\s+skipped\s+not-master`, `warm\s+skipped\s+not-slave`, `warm\s+ran\s+on a slave`,
				`export\s+ran\s+under the job lock`, `export\s+skipped\s+locked`, `stops gracefully`,
			} {
				if !regexp.MustCompile(want).MatchString(text) {
					t.Errorf("no line matching %q in:\n%s", want, text)
				}
			}
			stop := regexp.MustCompile(`instance (\d+)\s+stops gracefully`).FindStringSubmatchIndex(text)
			if stop == nil {
				t.Fatalf("no stop in:\n%s", text)
			}
			stopped := text[stop[2]:stop[3]]
			reports := regexp.MustCompile(`instance (\d+)\s+report\s+ran\s+on the master, epoch (\d+)`)
			var before, after uint64
			for _, m := range reports.FindAllStringSubmatchIndex(text, -1) {
				inst := text[m[2]:m[3]]
				epoch, _ := strconv.ParseUint(text[m[4]:m[5]], 10, 64)
				switch {
				case m[0] < stop[0] && inst == stopped:
					before = epoch
				case m[0] > stop[0] && inst != stopped && after == 0:
					after = epoch
				}
			}
			if before == 0 || after == 0 || after <= before {
				t.Errorf("report ran on %s before the stop with epoch %d and on another instance after it with epoch %d; want both, the second larger:\n%s",
					stopped, before, after, text)
			}
		})
	}
}

// checkBatonctl runs the batonctl command line the demo printed, while
// the demo runs (until done says it ended), until it names a master. The
// demo printed no such line, and batonctl had no flags to reach it.
func checkBatonctl(t *testing.T, ctl string, out *testenv.SyncBuffer, done chan error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "report  ran") {
		if time.Now().After(deadline) {
			t.Fatalf("no report ran within a minute:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	args, err := ctlline.Args(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for {
		code, stdout, stderr := testenv.RunBatonctl(t, ctl, args...)
		if code == 0 && strings.Contains(stdout, "master   127.0.0.1:acme:billing:") {
			return
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the demo ended before batonctl %s named its master: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
