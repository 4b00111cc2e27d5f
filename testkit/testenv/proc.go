package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// signal names the few signals testenv sends, independently of the platform.
type signal int

const (
	sigKill signal = iota
	sigTerm
	sigStop
	sigCont
)

// proc is one child process started in its own process group, so that
// signals reach the children it forks too (redis-server forks for
// replication snapshots and AOF rewrites).
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	err  error         // result of Wait; read only after done is closed
}

// startProc runs bin with args in dir. Its stdout and stderr are appended to
// outPath (redis-server writes fatal config errors there before it opens its
// log file).
func startProc(bin string, args []string, dir, outPath string) (*proc, error) {
	out, err := os.OpenFile(outPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("testenv: open output file: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("testenv: start %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended and been reaped.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// signalGroup sends sig to the whole process group. A group that no longer
// exists is not an error.
func (p *proc) signalGroup(sig signal) error {
	return signalGroup(p.pid(), sig)
}

// wait blocks until the process is reaped or timeout passes.
func (p *proc) wait(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return nil
	case <-t.C:
		return fmt.Errorf("testenv: process %d did not exit within %v", p.pid(), timeout)
	}
}

// kill sends SIGKILL to the group and waits for the process to be reaped.
func (p *proc) kill() error {
	if err := p.signalGroup(sigKill); err != nil {
		return err
	}
	return p.wait(10 * time.Second)
}

// terminate asks the process to shut down cleanly (SIGTERM, then SIGCONT in
// case it is paused) and falls back to kill after grace.
func (p *proc) terminate(grace time.Duration) error {
	if !p.exited() {
		if err := signalProcess(p.pid(), sigTerm); err != nil {
			return err
		}
		_ = p.signalGroup(sigCont)
		if p.wait(grace) == nil {
			// Reap stragglers such as a snapshot child.
			_ = p.signalGroup(sigKill)
			return nil
		}
	}
	return p.kill()
}
