package chaos

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The ledger is the resource the nodes share: one Redis hash per resource
// (the value and the last accepted token and node) and one list, the log
// of every write it applied in order. It lives on a redis-server that no
// fault touches. Its script is the check-and-set a fenced resource does:
// a token below the last accepted one is rejected; so is an equal one,
// except on the role resource from the node that wrote it (a master
// writes many times in one tenure).
//
//go:embed ledger.lua
var ledgerLua string

var ledgerScript = redis.NewScript(ledgerLua)

const ledgerLog = "chaos:ledger:log"

func ledgerKey(res string) string { return "chaos:ledger:" + res }

// Ledger is a client of the ledger.
type Ledger struct {
	rdb redis.UniversalClient
	// Unfenced makes writes skip the token check: the broken build of the
	// chaos tests, which must make the checker report violations.
	Unfenced bool
}

// NewLedger returns a ledger client on rdb.
func NewLedger(rdb redis.UniversalClient) *Ledger { return &Ledger{rdb: rdb} }

// Write applies value (the counter) or fire (the job) to resource res
// with token if the token passes the fencing check; ok reports whether it
// did.
func (l *Ledger) Write(ctx context.Context, node, res string, token uint64, holding string, value, fire int64) (ok bool, err error) {
	ok, _, err = l.run(ctx, "write", node, res, token, holding, value, fire)
	if err != nil {
		return false, fmt.Errorf("chaos: ledger write %s token %d: %w", res, token, err)
	}
	return ok, nil
}

// Read returns resource res's value to the holder of token, as a fenced
// resource does: it refuses (ok false) a token below the largest one any
// operation presented, and it raises that to token, so that an older
// holder that wakes up after this read can no longer write.
func (l *Ledger) Read(ctx context.Context, node, res string, token uint64) (value int64, ok bool, err error) {
	ok, value, err = l.run(ctx, "read", node, res, token, "", 0, 0)
	if err != nil {
		return 0, false, fmt.Errorf("chaos: ledger read %s token %d: %w", res, token, err)
	}
	return value, ok, nil
}

func (l *Ledger) run(ctx context.Context, op, node, res string, token uint64, holding string, value, fire int64) (bool, int64, error) {
	mode := "strict"
	switch {
	case l.Unfenced:
		mode = "off"
	case res == ResRole:
		mode = "same-node"
	}
	r, err := ledgerScript.Run(ctx, l.rdb, []string{ledgerKey(res), ledgerLog},
		op, strconv.FormatUint(token, 10), node, holding, value, fire, mode, res).Slice()
	if err != nil {
		return false, 0, err
	}
	if len(r) != 2 {
		return false, 0, fmt.Errorf("unexpected reply %v", r)
	}
	done, _ := r[0].(int64)
	text, _ := r[1].(string)
	v, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return false, 0, fmt.Errorf("value %q: %w", text, err)
	}
	return done == 1, v, nil
}

// Value returns the resource's current value (0 when never written).
func (l *Ledger) Value(ctx context.Context, res string) (int64, error) {
	v, err := l.rdb.HGet(ctx, ledgerKey(res), "value").Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("chaos: ledger read %s: %w", res, err)
	}
	return v, nil
}

// History returns every applied write as KindAccepted events in the
// ledger's order, then one KindFinal event per resource that holds a
// value.
func (l *Ledger) History(ctx context.Context) ([]Event, error) {
	entries, err := l.rdb.LRange(ctx, ledgerLog, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("chaos: read ledger log: %w", err)
	}
	events := make([]Event, 0, len(entries)+3)
	for i, s := range entries {
		e, err := parseLogEntry(s)
		if err != nil {
			return nil, fmt.Errorf("chaos: ledger log entry %d %q: %w", i+1, s, err)
		}
		e.Seq = uint64(i + 1)
		events = append(events, e)
	}
	for _, res := range []string{ResCounter, ResRole, ResJob} {
		v, err := l.Value(ctx, res)
		if err != nil {
			return nil, err
		}
		events = append(events, Event{Kind: KindFinal, Resource: res, Value: v})
	}
	return events, nil
}

// parseLogEntry reads "res token node holding value fire time_us".
func parseLogEntry(s string) (Event, error) {
	f := strings.Fields(s)
	if len(f) != 7 {
		return Event{}, fmt.Errorf("want 7 fields, got %d", len(f))
	}
	token, err1 := strconv.ParseUint(f[1], 10, 64)
	value, err2 := strconv.ParseInt(f[4], 10, 64)
	fire, err3 := strconv.ParseInt(f[5], 10, 64)
	us, err4 := strconv.ParseInt(f[6], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return Event{}, err
	}
	if us < 0 || us > math.MaxInt64/1000 {
		return Event{}, fmt.Errorf("time %d µs is out of range", us)
	}
	return Event{Kind: KindAccepted, Resource: f[0], Token: token, Node: f[2], Holding: f[3],
		Value: value, Fire: fire, Start: us * 1000}, nil
}
