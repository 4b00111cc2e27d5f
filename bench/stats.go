package bench

import (
	"math"
	"slices"
	"time"
)

// minP99Samples is the fewest samples a p99 is reported from.
const minP99Samples = 100

// window is the measured part of a run: from the end of the warm-up to
// the end of the run, in UnixNano.
type window struct{ from, to int64 }

func (w window) seconds() float64 { return float64(w.to-w.from) / 1e9 }

// summary is the statistics of one run, or of the runs of one
// implementation and scenario over several rounds (merge). finish sorts
// the samples and computes the rates.
type summary struct {
	ops        int     // acquisitions in the window
	seconds    float64 // length of the window
	wait       []time.Duration
	unfinished int // waits cut off by the end, in wait
	handoff    []time.Duration
	held       time.Duration // total time from acquisition to Unlock
	overlaps   int
	// load is the server's work during the runs, and loadOps the
	// acquisitions it served (warm-up included).
	load    serverLoad
	loadOps int

	opsPerS  float64
	holdMean time.Duration
}

// summarize computes the statistics of a run's records. allPairs says
// that every consecutive pair of holders is a handoff (the uncontended
// run, whose single goroutine asks again at once); otherwise a pair counts
// only if the next holder was already waiting when the release began.
func summarize(recs []Record, unfinished []int64, overlaps int, w window, allPairs bool) summary {
	s := summary{overlaps: overlaps, seconds: w.seconds()}
	for _, r := range recs {
		if r[recGot] < w.from || r[recGot] > w.to {
			continue
		}
		s.ops++
		s.held += time.Duration(r[recRel] - r[recGot])
		if r[recWait] >= w.from {
			s.wait = append(s.wait, time.Duration(r[recGot]-r[recWait]))
		}
	}
	for _, t0 := range unfinished {
		if t0 >= w.from && t0 < w.to {
			s.wait = append(s.wait, time.Duration(w.to-t0))
			s.unfinished++
		}
	}

	ordered := slices.Clone(recs)
	slices.SortFunc(ordered, func(a, b Record) int { return cmpInt64(a[recSeq], b[recSeq]) })
	for i := 1; i < len(ordered); i++ {
		prev, next := ordered[i-1], ordered[i]
		if next[recSeq] != prev[recSeq]+1 || next[recGot] < w.from || next[recGot] > w.to {
			continue
		}
		if !allPairs && next[recWait] > prev[recRel] {
			continue // the lock was free when next asked: no handoff
		}
		s.handoff = append(s.handoff, time.Duration(next[recGot]-prev[recRel]))
	}
	s.finish()
	return s
}

// merge adds the samples of o to s; call finish before reading the
// rates and percentiles.
func (s *summary) merge(o summary) {
	s.ops += o.ops
	s.seconds += o.seconds
	s.wait = append(s.wait, o.wait...)
	s.unfinished += o.unfinished
	s.handoff = append(s.handoff, o.handoff...)
	s.held += o.held
	s.overlaps += o.overlaps
	s.load.add(o.load)
	s.loadOps += o.loadOps
}

// finish sorts the samples and computes the rates.
func (s *summary) finish() {
	slices.Sort(s.wait)
	slices.Sort(s.handoff)
	s.opsPerS, s.holdMean = 0, 0
	if s.seconds > 0 {
		s.opsPerS = float64(s.ops) / s.seconds
	}
	if s.ops > 0 {
		s.holdMean = s.held / time.Duration(s.ops)
	}
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted, or 0 when it is empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(float64(len(sorted))*p/100)) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

// ms converts d to milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
