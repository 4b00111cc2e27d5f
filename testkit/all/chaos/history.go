package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Kind names what an Event records.
type Kind string

// The kinds of Event. Nodes write Start, Write, Read, Hold, Master and Error;
// the nemesis writes Fault; the test reads the ledger after the run and
// adds Accepted (in the ledger's own order) and Final.
const (
	// KindStart: a node process (one incarnation) started. Pid is set.
	KindStart Kind = "start"

	// KindWrite: one fenced write to a ledger resource. A node logs the
	// attempt twice: once with Result ResultInvoke before it sends it, and
	// once with the outcome (ResultOK, ResultRejected or ResultError) and
	// the same Op. An invoke without an outcome (the node was killed) is
	// indeterminate: it may or may not have been applied.
	KindWrite Kind = "write"

	// KindRead: one fenced read of a ledger resource by a lock holder,
	// logged like a write (invoke, then ok with the Value read, rejected
	// or error): the read presents the token, so that an older holder can
	// no longer write after it.
	KindRead Kind = "read"

	// KindHold: a node was granted a lock (Resource ResLock or ResJob)
	// with Token; Holding names this one holding. Start is when the grant
	// came back.
	KindHold Kind = "hold"

	// KindMaster: an interval during which a node read IsMaster true,
	// from its first true sample (Start) to its last true sample (End),
	// in the tenure whose epoch is Token. A node rewrites the interval
	// with a later End while it lasts; the checker keeps the largest End
	// per (Node, Start).
	KindMaster Kind = "master"

	// KindError: an error a node's code got back from baton. Class is
	// ClassDocumented or ClassUndocumented; Op says from which call.
	KindError Kind = "error"

	// KindFault: one injected fault, from Start (injected) to End
	// (healed). Fault names its kind, Target the node or server.
	KindFault Kind = "fault"

	// KindAccepted: one write the ledger applied, in the ledger's order
	// (Seq). Node, Holding, Token, Value and Fire are the write's.
	KindAccepted Kind = "accepted"

	// KindFinal: the ledger's last state of a resource; Value holds it.
	KindFinal Kind = "final"
)

// Ledger resources and lock names.
const (
	ResCounter = "counter" // incremented read-modify-write under synclock; fenced by lock tokens, strictly increasing
	ResRole    = "role"    // written by the master-only job; fenced by epochs, equal epochs allowed from one node
	ResJob     = "job"     // written by the ShedLock-style job; fenced by job lock tokens, strictly increasing
	ResLock    = "lock"    // Resource of KindHold for the synclock lock guarding the counter
)

// Results of a KindWrite.
const (
	ResultInvoke   = "invoke"
	ResultOK       = "ok"
	ResultRejected = "rejected" // the ledger refused the token as stale
	ResultError    = "error"    // the write failed otherwise; it was not applied
)

// Classes of a KindError.
const (
	ClassDocumented   = "documented"
	ClassUndocumented = "undocumented"
)

// Fault kinds, as counted in the report.
const (
	FaultKill9              = "kill9"
	FaultSigstop            = "sigstop"
	FaultServerRestart      = "server_restart"
	FaultServerRestartEmpty = "server_restart_empty"
	FaultPartition          = "partition"
	FaultServerPause        = "server_pause"
	FaultSentinelFailover   = "sentinel_failover"
)

// FaultKinds lists every fault kind in report order.
var FaultKinds = []string{
	FaultKill9, FaultSigstop, FaultServerRestart, FaultServerRestartEmpty,
	FaultPartition, FaultServerPause, FaultSentinelFailover,
}

// Event is one line of a history file (JSON lines). Times are Unix
// nanoseconds of the wall clock; every process of a run shares one
// machine and so one clock.
type Event struct {
	Kind     Kind   `json:"kind"`
	Node     string `json:"node,omitempty"`    // node incarnation, such as "n2.1"; "nemesis" for faults
	Op       uint64 `json:"op,omitempty"`      // per-node sequence number of a write, pairing invoke and outcome
	Seq      uint64 `json:"seq,omitempty"`     // ledger order of an Accepted event, from 1
	Start    int64  `json:"start,omitempty"`   // when it started (Unix ns)
	End      int64  `json:"end,omitempty"`     // when it ended (Unix ns); 0 if unknown
	Resource string `json:"res,omitempty"`     // ResCounter, ResRole, ResJob or ResLock
	Token    uint64 `json:"token,omitempty"`   // fencing token or epoch
	Holding  string `json:"holding,omitempty"` // one lock holding or tenure: node incarnation + local number
	Value    int64  `json:"value,omitempty"`   // counter value written, or a Final value
	Fire     int64  `json:"fire,omitempty"`    // the job's fire time (Unix ms) for ResJob
	Result   string `json:"result,omitempty"`  // of a KindWrite
	Class    string `json:"class,omitempty"`   // of a KindError
	Err      string `json:"err,omitempty"`     // error text
	Fault    string `json:"fault,omitempty"`   // of a KindFault
	Target   string `json:"target,omitempty"`  // of a KindFault: node name or server address
	Pid      int    `json:"pid,omitempty"`     // of a KindStart
	Detail   string `json:"detail,omitempty"`  // free text for people reading the history
}

// String renders e on one line for violation reports.
func (e Event) String() string {
	type plain Event // no String method: no recursion
	b, err := json.Marshal(plain(e))
	if err != nil {
		return fmt.Sprintf("%+v", plain(e))
	}
	return string(b)
}

// Writer appends events to a history file, one JSON line per write
// call, so that a process killed with SIGKILL loses no line it wrote.
type Writer struct {
	f *os.File
}

// Create opens (creating or appending to) the history file at path.
func Create(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("chaos: open history %s: %w", path, err)
	}
	return &Writer{f: f}, nil
}

// Write appends e. It is safe for concurrent use: each event is one
// write(2) of less than a page on an O_APPEND file.
func (w *Writer) Write(e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("chaos: encode event: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.f.Write(b); err != nil {
		return fmt.Errorf("chaos: write history %s: %w", w.f.Name(), err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// Read parses a history of JSON lines. A last line cut short (its
// writer was killed in the middle) is dropped; any other bad line is an
// error naming its number.
func Read(r io.Reader) ([]Event, error) {
	var events []Event
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var pending error
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if pending != nil {
			return nil, pending
		}
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			pending = fmt.Errorf("chaos: history line %d: %w", n, err)
			continue
		}
		events = append(events, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("chaos: read history: %w", err)
	}
	return events, nil
}

// ReadDir reads every *.jsonl file in dir and returns all their events,
// sorted by Start (stable, so each file keeps its own order).
func ReadDir(dir string) ([]Event, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, errors.New("chaos: no history files (*.jsonl) in " + dir)
	}
	slices.Sort(paths)
	var all []Event
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		events, err := Read(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		all = append(all, events...)
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Start < all[j].Start })
	return all, nil
}
