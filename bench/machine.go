package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Machine describes where the results were measured.
type Machine struct {
	CPUs         int     `json:"nproc"`
	CPUModel     string  `json:"cpu_model"`
	MemoryGiB    float64 `json:"memory_gib,omitempty"`
	OS           string  `json:"os"`
	Kernel       string  `json:"kernel,omitempty"`
	GoVersion    string  `json:"go_version"`
	RedisVersion string  `json:"redis_version"`
}

func (m Machine) memory() string {
	if m.MemoryGiB == 0 {
		return "memory unknown"
	}
	return fmt.Sprintf("%.0f GiB", m.MemoryGiB)
}

// detectMachine reads the machine's description; the Redis version comes
// from the server rdb talks to.
func detectMachine(ctx context.Context, rdb *redis.Client) (Machine, error) {
	m := Machine{
		CPUs:      runtime.NumCPU(),
		CPUModel:  "unknown",
		OS:        runtime.GOOS + "/" + runtime.GOARCH,
		GoVersion: runtime.Version(),
	}
	if v := procField("/proc/cpuinfo", "model name"); v != "" {
		m.CPUModel = v
	}
	if v := procField("/proc/meminfo", "MemTotal"); v != "" {
		if kb, err := strconv.ParseFloat(strings.TrimSuffix(v, " kB"), 64); err == nil {
			m.MemoryGiB = round(kb/(1<<20), 1)
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return m, fmt.Errorf("bench: INFO server: %w", err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			m.RedisVersion = v
		}
	}
	return m, nil
}

// procField returns the value of the first "name : value" line of a /proc
// file, or "" when there is none.
func procField(path, name string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == name {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// serverLoad is what redis-server has done so far: commands run and CPU
// time used, in all and by command.
type serverLoad struct {
	calls   int64
	cpuUsec float64
	// reads and writes are INFO stats' total_reads_processed and
	// total_writes_processed: the server's socket reads and writes (a
	// published message is one write to each subscribed client).
	reads, writes int64
	// cmds is INFO commandstats by command name (lower case, "config|set"
	// for a subcommand).
	cmds map[string]cmdLoad
}

// cmdLoad is one command's line of INFO commandstats: calls, and the
// server's time in them (µs). A script's time includes the commands it
// calls, which are counted again on their own lines.
type cmdLoad struct {
	calls int64
	usec  int64
}

// readLoad reads INFO commandstats, cpu and stats.
func readLoad(ctx context.Context, rdb *redis.Client) (serverLoad, error) {
	info, err := rdb.Info(ctx, "commandstats", "cpu", "stats").Result()
	if err != nil {
		return serverLoad{cmds: map[string]cmdLoad{}}, fmt.Errorf("bench: INFO commandstats cpu stats: %w", err)
	}
	return parseLoad(info), nil
}

// parseLoad reads the reply of INFO commandstats, cpu and stats.
func parseLoad(info string) serverLoad {
	l := serverLoad{cmds: map[string]cmdLoad{}}
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "cmdstat_"); ok {
			// cmdstat_set:calls=12,usec=34,...
			name, fields, _ := strings.Cut(rest, ":")
			c := parseCmdstat(fields)
			l.cmds[name] = c
			l.calls += c.calls
			continue
		}
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				sec, _ := strconv.ParseFloat(v, 64)
				l.cpuUsec += sec * 1e6
			}
		}
		if v, ok := strings.CutPrefix(line, "total_reads_processed:"); ok {
			l.reads, _ = strconv.ParseInt(v, 10, 64)
		} else if v, ok := strings.CutPrefix(line, "total_writes_processed:"); ok {
			l.writes, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return l
}

// parseCmdstat reads "calls=12,usec=34,..." of a commandstats line.
func parseCmdstat(fields string) cmdLoad {
	var c cmdLoad
	for f := range strings.SplitSeq(fields, ",") {
		if v, ok := strings.CutPrefix(f, "calls="); ok {
			c.calls, _ = strconv.ParseInt(v, 10, 64)
		} else if v, ok := strings.CutPrefix(f, "usec="); ok {
			c.usec, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return c
}

// sub returns the work done between before and l.
// The commands are the run's alone: INFO (the harness reading the load)
// is left out of cmds, but not of calls.
func (l serverLoad) sub(before serverLoad) serverLoad {
	d := serverLoad{calls: l.calls - before.calls, cpuUsec: l.cpuUsec - before.cpuUsec,
		reads: l.reads - before.reads, writes: l.writes - before.writes, cmds: map[string]cmdLoad{}}
	for name, c := range l.cmds {
		b := before.cmds[name]
		c.calls -= b.calls
		if c.usec -= b.usec; c.calls > 0 && name != "info" {
			d.cmds[name] = c
		}
	}
	return d
}

// add adds o's work to l.
func (l *serverLoad) add(o serverLoad) {
	l.calls += o.calls
	l.cpuUsec += o.cpuUsec
	l.reads += o.reads
	l.writes += o.writes
	if l.cmds == nil {
		l.cmds = map[string]cmdLoad{}
	}
	for name, c := range o.cmds {
		t := l.cmds[name]
		t.calls += c.calls
		t.usec += c.usec
		l.cmds[name] = t
	}
}
