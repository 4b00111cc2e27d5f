package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// turnSet is one configuration that takes turns with others: its
// goroutines, one per locker, run uncontended lock+unlock cycles back to
// back, and the CPU its servers and this process use is counted.
type turnSet struct {
	name    string
	lockers []Locker
	servers []*redis.Client // admin clients of the servers, for INFO cpu
}

// turnTotals is what a turnSet did in its counted turns.
type turnTotals struct {
	cycles    int
	seconds   float64
	serverCPU []float64 // CPU seconds used by each server
	clientCPU float64   // CPU seconds used by this process
}

func (t turnTotals) opsPerS() float64 {
	if t.seconds == 0 {
		return 0
	}
	return float64(t.cycles) / t.seconds
}

// serverShares returns each server's CPU use as a share of one CPU.
func (t turnTotals) serverShares() []float64 {
	out := make([]float64, len(t.serverCPU))
	for i, c := range t.serverCPU {
		if t.seconds > 0 {
			out[i] = round(c/t.seconds, 3)
		}
	}
	return out
}

// runTurns lets the sets run in turns of turn until each has had total,
// one uncounted turn each first, so that all of them see the same moments
// of a machine whose speed drifts. Each lap starts with another set.
func runTurns(ctx context.Context, sets []turnSet, total, turn time.Duration) ([]turnTotals, error) {
	out := make([]turnTotals, len(sets))
	for i := range sets {
		if _, err := runTurn(ctx, sets[i], turn); err != nil {
			return nil, err
		}
		out[i].serverCPU = make([]float64, len(sets[i].servers))
	}
	for lap := 0; time.Duration(lap)*turn < total; lap++ {
		d := min(turn, total-time.Duration(lap)*turn)
		for j := range sets {
			i := (j + lap) % len(sets)
			t, err := runTurn(ctx, sets[i], d)
			if err != nil {
				return nil, err
			}
			out[i].cycles += t.cycles
			out[i].seconds += t.seconds
			out[i].clientCPU += t.clientCPU
			for k, c := range t.serverCPU {
				out[i].serverCPU[k] += c
			}
		}
	}
	return out, nil
}

// runTurn runs the set's goroutines for d and returns what they did.
func runTurn(ctx context.Context, s turnSet, d time.Duration) (turnTotals, error) {
	before, err := serversCPU(ctx, s.servers)
	if err != nil {
		return turnTotals{}, err
	}
	clientBefore := processCPU()
	start := time.Now()
	end := start.Add(d)
	counts := make([]int, len(s.lockers))
	errs := make([]error, len(s.lockers))
	var wg sync.WaitGroup
	for i, l := range s.lockers {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				unlock, err := l.Lock(ctx)
				if err == nil {
					err = unlock(ctx)
				}
				if err != nil {
					errs[i] = fmt.Errorf("%s: %w", s.name, err)
					return
				}
				counts[i]++
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return turnTotals{}, err
	}
	t := turnTotals{seconds: elapsed.Seconds(), clientCPU: processCPU() - clientBefore}
	for _, n := range counts {
		t.cycles += n
	}
	after, err := serversCPU(ctx, s.servers)
	if err != nil {
		return turnTotals{}, err
	}
	for k := range after {
		t.serverCPU = append(t.serverCPU, after[k]-before[k])
	}
	return t, nil
}

// serversCPU returns the CPU seconds each server has used.
func serversCPU(ctx context.Context, servers []*redis.Client) ([]float64, error) {
	out := make([]float64, len(servers))
	for i, c := range servers {
		l, err := readLoad(ctx, c)
		if err != nil {
			return nil, err
		}
		out[i] = l.cpuUsec / 1e6
	}
	return out, nil
}
