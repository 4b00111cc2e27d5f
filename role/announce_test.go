package role

import (
	"context"
	"sync"
	"testing"
)

// tagRecorder is an Announcer that keeps the last tag it was given and
// whether it was withdrawn.
type tagRecorder struct {
	mu        sync.Mutex
	tag       string
	withdrawn bool
}

func (r *tagRecorder) Announce(_ context.Context, master bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tag = "slave"
	if master {
		r.tag = "master"
	}
	return nil
}

func (r *tagRecorder) Withdraw(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.withdrawn = true
	return nil
}

func (r *tagRecorder) state() (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tag, r.withdrawn
}

// Announcements follow the role on the memory store, as on Consul's
// catalog (TestConsulServiceAnnouncesRole): the master is announced as
// master and the other as slave, the tags follow a handover, and the
// stopped instance withdraws.
func TestAnnouncementsFollowHandover(t *testing.T) {
	store := newStore(t)
	var recs [2]tagRecorder
	var els [2]*Elector
	for i := range els {
		el, err := NewElector(store, mustID(t, 8100+i), fast, quiet, WithAnnouncer(&recs[i]))
		if err != nil {
			t.Fatal(err)
		}
		els[i] = el
	}
	start(t, els[0])
	eventually(t, "the first instance announced as master", func() bool { tag, _ := recs[0].state(); return tag == "master" })
	start(t, els[1])
	eventually(t, "the second instance announced as slave", func() bool { tag, _ := recs[1].state(); return tag == "slave" })

	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := els[0].Halt(ctx); err != nil {
		t.Fatal(err)
	}
	if _, withdrawn := recs[0].state(); !withdrawn {
		t.Fatal("Stop returned before the stopped instance withdrew its announcement")
	}
	eventually(t, "the successor announced as master", func() bool { tag, _ := recs[1].state(); return tag == "master" })
}
