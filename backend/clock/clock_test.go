package clock

import (
	"runtime"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeTimersFireInDeadlineOrder(t *testing.T) {
	f := NewFake(t0)
	var order []int
	fired := make(chan int, 3)
	late := f.NewTimer(3 * time.Second)
	f.AfterFunc(time.Second, func() { fired <- 1 })
	early := f.NewTimer(2 * time.Second)
	if n := f.Timers(); n != 3 {
		t.Fatalf("%d timers armed, want 3", n)
	}
	f.Advance(2500 * time.Millisecond)
	order = append(order, <-fired)
	select {
	case at := <-early.C():
		if !at.Equal(t0.Add(2 * time.Second)) {
			t.Fatalf("timer fired at %v, want its deadline", at)
		}
		order = append(order, 2)
	default:
		t.Fatal("the 2s timer did not fire at 2.5s")
	}
	select {
	case <-late.C():
		t.Fatal("the 3s timer fired at 2.5s")
	default:
	}
	if got := f.Now(); !got.Equal(t0.Add(2500 * time.Millisecond)) {
		t.Fatalf("Now = %v after Advance", got)
	}
	if len(order) != 2 || order[0] != 1 || order[1] != 2 {
		t.Fatalf("order %v", order)
	}
}

func TestFakeStopAndReset(t *testing.T) {
	f := NewFake(t0)
	tm := f.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of an armed timer reported false")
	}
	if tm.Stop() {
		t.Fatal("second Stop reported true")
	}
	f.Advance(2 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer reported it active")
	}
	f.Advance(time.Second)
	select {
	case <-tm.C():
	default:
		t.Fatal("a reset timer did not fire")
	}
	if f.Since(t0) != 3*time.Second {
		t.Fatalf("Since = %v", f.Since(t0))
	}
}

func TestWaitForTimers(t *testing.T) {
	f := NewFake(t0)
	done := make(chan struct{})
	go func() {
		time.Sleep(10 * time.Millisecond)
		f.NewTimer(time.Second)
	}()
	if !f.WaitForTimers(1, done) {
		t.Fatal("WaitForTimers gave up")
	}
	close(done)
	if f.WaitForTimers(5, done) {
		t.Fatal("WaitForTimers reported 5 timers")
	}
}

func TestReal(t *testing.T) {
	start := Real.Now()
	tm := Real.NewTimer(time.Millisecond)
	<-tm.C()
	if Real.Since(start) < time.Millisecond {
		t.Fatal("the real timer fired early")
	}
	ch := make(chan struct{})
	Real.AfterFunc(time.Millisecond, func() { close(ch) })
	<-ch
}

// TestFakeStopDropsStaleFire: as with Go 1.23+ timers, a fire that was
// sent but not received before Stop or Reset is never delivered after it.
func TestFakeStopDropsStaleFire(t *testing.T) {
	f := NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.Advance(time.Second) // fires; nobody has received it yet
	if tm.Stop() {
		t.Error("Stop of a timer that already fired reported it active")
	}
	select {
	case <-tm.C():
		t.Error("a fire sent before Stop was received after it")
	default:
	}

	f.Advance(time.Second)
	tm.Reset(time.Second) // the old fire (none now) must not count for the new deadline
	tm2 := f.NewTimer(time.Second)
	f.Advance(time.Second) // both fire
	tm2.Reset(5 * time.Second)
	select {
	case <-tm2.C():
		t.Error("a fire sent before Reset was received after it: the reader would think the new deadline passed")
	default:
	}
	select {
	case at := <-tm.C():
		if !at.Equal(t0.Add(3 * time.Second)) {
			t.Errorf("reset timer fired at %v, want %v", at, t0.Add(3*time.Second))
		}
	default:
		t.Error("the reset timer did not fire at its new deadline")
	}
}

// fatalRecorder is a TB whose Fatalf records the failure and ends the
// goroutine, as testing's does.
type fatalRecorder struct{ msg chan string }

func (fatalRecorder) Helper() {}
func (r fatalRecorder) Fatalf(format string, args ...any) {
	r.msg <- format
	runtime.Goexit()
}

func TestAwaitTimers(t *testing.T) {
	f := NewFake(t0)
	go func() {
		time.Sleep(10 * time.Millisecond)
		f.NewTimer(time.Second)
	}()
	f.AwaitTimers(t, 1) // returns: a timer got armed
	if n := f.Timers(); n != 1 {
		t.Fatalf("%d timers after AwaitTimers(1)", n)
	}
}

func TestAwaitTimersFailsInsteadOfHanging(t *testing.T) {
	defer func(d time.Duration) { awaitTimeout = d }(awaitTimeout)
	awaitTimeout = 50 * time.Millisecond
	f := NewFake(t0)
	r := fatalRecorder{msg: make(chan string, 1)}
	go f.AwaitTimers(r, 1) // nothing ever arms a timer
	select {
	case <-r.msg:
	case <-time.After(time.Minute):
		t.Fatal("AwaitTimers neither returned nor failed")
	}
}
