package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// workerEnv is the environment variable that makes a process a worker of
// a contended run; its value is the JSON of a workerSpec. The parent
// re-executes its own program with it set, so a program (or a test
// binary's TestMain) that can be a worker calls WorkerMain first thing.
const workerEnv = "LOCKBENCH_WORKER"

// readyLine is what a worker prints once it is connected and warmed up.
const readyLine = "ready"

// workerSpec tells a worker process what to run.
type workerSpec struct {
	Impl       string        `json:"impl"`
	Addr       string        `json:"addr"`
	Proc       int           `json:"proc"` // 0-based process number
	Goroutines int           `json:"goroutines"`
	Shared     bool          `json:"shared"`
	Key        string        `json:"key"`
	Marker     string        `json:"marker"`
	Seq        string        `json:"seq"`
	CS         time.Duration `json:"cs"`
	Think      time.Duration `json:"think"`
	Duration   time.Duration `json:"duration"`
}

// workerReport is what a worker prints when its run is over.
type workerReport struct {
	Goroutines []loopResult `json:"goroutines"`
}

// IsWorker reports whether this process was started as a worker of a
// contended run.
func IsWorker() bool { return os.Getenv(workerEnv) != "" }

// WorkerMain runs the worker described by the environment and returns the
// process's exit code. The protocol on the standard streams: the worker
// prints "ready" once its clients are connected and warmed up, reads the
// start time (UnixNano) from a line of standard input, runs until start
// plus the spec's duration, and prints its report as one JSON document.
// Errors go to standard error.
func WorkerMain() int {
	var spec workerSpec
	if err := json.Unmarshal([]byte(os.Getenv(workerEnv)), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "lockbench worker: bad %s: %v\n", workerEnv, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runWorker(ctx, spec, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "lockbench worker %d (%s): %v\n", spec.Proc, spec.Impl, err)
		return 1
	}
	return 0
}

func runWorker(ctx context.Context, spec workerSpec, in io.Reader, out io.Writer) (err error) {
	im, err := LookupImpl(spec.Impl)
	if err != nil {
		return err
	}
	// Each process numbers its clients from its own block, so that no two
	// clients of a run share an identity.
	t, err := newTeam(im, spec.Addr, spec.Goroutines, spec.Shared, spec.Key, 1+spec.Proc*1000)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := t.close(); err == nil {
			err = cerr
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = t.warmUp(wctx)
	cancel()
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(out, readyLine); err != nil {
		return err
	}

	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read start time: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return fmt.Errorf("bad start time %q: %w", line, err)
	}
	start := time.Unix(0, ns)
	sleepUntil(start)

	cfg := loopConfig{CS: spec.CS, Think: spec.Think, Marker: spec.Marker, Seq: spec.Seq, End: start.Add(spec.Duration)}
	rep := workerReport{Goroutines: make([]loopResult, spec.Goroutines)}
	var wg sync.WaitGroup
	for i := range spec.Goroutines {
		wg.Go(func() { rep.Goroutines[i] = runLoop(ctx, t.lockers[i], t.rdb(i), cfg) })
	}
	wg.Wait()
	return json.NewEncoder(out).Encode(rep)
}

// worker is one worker process of a contended run.
type worker struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	once  sync.Once
}

func startWorker(ctx context.Context, o Options, spec workerSpec) (*worker, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, o.Exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(js))
	cmd.Stderr = o.WorkerStderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker %s: %w", o.Exe, err)
	}
	return &worker{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}, nil
}

// ready waits for the worker's "ready" line.
func (w *worker) ready() error {
	line, err := w.out.ReadString('\n')
	if err != nil {
		return fmt.Errorf("worker exited before it was ready (%w): %w", err, w.wait())
	}
	if strings.TrimSpace(line) != readyLine {
		return fmt.Errorf("worker said %q, want %q", line, readyLine)
	}
	return nil
}

// start sends the start time.
func (w *worker) start(at time.Time) error {
	_, err := io.WriteString(w.stdin, strconv.FormatInt(at.UnixNano(), 10)+"\n")
	return errors.Join(err, w.stdin.Close())
}

// report reads the worker's report and waits for it to exit.
func (w *worker) report() (workerReport, error) {
	var rep workerReport
	derr := json.NewDecoder(w.out).Decode(&rep)
	if err := w.wait(); err != nil {
		return rep, err
	}
	if derr != nil {
		return rep, fmt.Errorf("read report: %w", derr)
	}
	return rep, nil
}

func (w *worker) wait() error {
	var err error
	w.once.Do(func() { err = w.cmd.Wait() })
	return err
}

// kill ends a worker that is still running (after a failure elsewhere).
func (w *worker) kill() {
	if w.cmd.ProcessState == nil {
		_ = w.cmd.Process.Kill()
		_ = w.wait()
	}
}
