package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// opTimeout bounds the harness's own Redis commands and every unlock.
const opTimeout = 5 * time.Second

// Record is one acquisition, in nanoseconds of the wall clock (UnixNano):
// when Lock was called, when it returned with the lock, and when Unlock
// was called; Seq orders the holders of one run (1, 2, ...). It travels
// as a JSON array to keep worker reports small.
type Record [4]int64

// Fields of a Record.
const (
	recWait = iota // Lock called
	recGot         // Lock returned, lock held
	recRel         // Unlock called
	recSeq         // order among the run's holders
)

// loopConfig drives one worker goroutine.
type loopConfig struct {
	// CS is how long the lock is held, from the acquisition to the call
	// of Unlock; Think is the pause after Unlock before the next Lock.
	CS, Think time.Duration
	// Marker and Seq are the bookkeeping keys of a contended run: the
	// overlap marker and the holder counter. Empty in uncontended runs,
	// which do no bookkeeping and number their cycles locally.
	Marker, Seq string
	// End is when the goroutine stops asking for the lock. A Lock still
	// waiting then is cancelled, unless Uncancelled is set.
	End time.Time
	// Uncancelled lets a Lock that started before End finish. The
	// uncontended turns set it: their Lock never waits for another holder,
	// and cancelling one whose request Redis has already served would
	// leave the key held by nobody until its TTL, stalling the next turn.
	Uncancelled bool
}

// loopResult is what one goroutine saw.
type loopResult struct {
	Records []Record `json:"records"`
	// Unfinished holds the start times of waits that the end of the run
	// cut off.
	Unfinished []int64 `json:"unfinished,omitempty"`
	Overlaps   int     `json:"overlaps"`
	Err        string  `json:"err,omitempty"`
}

// runLoop locks and unlocks l until cfg.End, recording every acquisition.
// rdb carries the bookkeeping commands. It returns early, with Err set, if
// the lock or Redis fails.
func runLoop(ctx context.Context, l Locker, rdb *redis.Client, cfg loopConfig) loopResult {
	var res loopResult
	lockCtx, cancel := context.WithDeadline(ctx, cfg.End)
	defer cancel()
	if cfg.Uncancelled {
		lockCtx = ctx
	}
	// Bookkeeping and unlocks finish even after the run's end.
	bg := context.WithoutCancel(ctx)

	var localSeq int64
	decrRTT := 50 * time.Microsecond // running estimate of one DECR
	for {
		t0 := time.Now()
		if !t0.Before(cfg.End) || ctx.Err() != nil {
			return res
		}
		unlock, err := l.Lock(lockCtx)
		if err != nil {
			if lockCtx.Err() != nil {
				res.Unfinished = append(res.Unfinished, t0.UnixNano())
				return res
			}
			res.Err = err.Error()
			return res
		}
		t1 := time.Now()
		rec := Record{recWait: t0.UnixNano(), recGot: t1.UnixNano()}

		var bookErr error
		if cfg.Marker != "" {
			rec[recSeq], decrRTT, bookErr = hold(bg, rdb, cfg, t1, decrRTT, &res.Overlaps)
		} else {
			localSeq++
			rec[recSeq] = localSeq
			if cfg.CS > 0 {
				sleepUntil(t1.Add(cfg.CS))
			}
		}

		rec[recRel] = time.Now().UnixNano()
		uctx, ucancel := context.WithTimeout(bg, opTimeout)
		uerr := unlock(uctx)
		ucancel()
		res.Records = append(res.Records, rec)
		if err := errors.Join(bookErr, uerr); err != nil {
			res.Err = err.Error()
			return res
		}
		if cfg.Think > 0 {
			sleepUntil(time.Now().Add(cfg.Think))
		}
	}
}

// hold is the contended critical section: it marks the holding in Redis,
// checks that nobody else is inside, takes the holder's sequence number,
// and returns just before got+cs, with the marker taken back. The DECR is
// started early by its measured round trip so that the section lasts cs
// bookkeeping included. It returns the sequence number and the new DECR
// estimate.
func hold(ctx context.Context, rdb *redis.Client, cfg loopConfig, got time.Time, decrRTT time.Duration, overlaps *int) (int64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	var marker, seq *redis.IntCmd
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		marker = p.Incr(ctx, cfg.Marker)
		seq = p.Incr(ctx, cfg.Seq)
		return nil
	})
	if err != nil {
		return 0, decrRTT, fmt.Errorf("bookkeeping INCR: %w", err)
	}
	if marker.Val() != 1 {
		*overlaps++
	}
	sleepUntil(got.Add(cfg.CS - decrRTT))
	start := time.Now()
	if err := rdb.Decr(ctx, cfg.Marker).Err(); err != nil {
		return seq.Val(), decrRTT, fmt.Errorf("bookkeeping DECR: %w", err)
	}
	took := time.Since(start)
	decrRTT = (7*decrRTT + min(took, cfg.CS/4)) / 8
	return seq.Val(), decrRTT, nil
}
