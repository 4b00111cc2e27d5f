package backendtest

import (
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// testMembersUpTo checks, on a store whose registry implements
// backend.MemberLister, that MembersUpTo lists at most limit live members
// sorted by name, those claiming an identity in first before those that
// expire last, each as Members reports it, and counts the others in
// More; a limit below 1 is ErrInvalidArgument.
func (s *suite) testMembersUpTo(t *testing.T) {
	ctx := testCtx(t)
	r := s.registry(t)
	ml, ok := r.(backend.MemberLister)
	if !ok {
		t.Skip("the store does not implement backend.MemberLister (optional)")
	}
	group := s.key("upto-members")
	for i := 1; i <= 5; i++ {
		n := strconv.Itoa(i)
		m := backend.Member{Name: "proc-" + n, Identity: "id-" + n, Data: []byte("data-" + n)}
		heartbeat(t, ctx, r, group, m, longTTL-time.Duration(5-i)*time.Second) // proc-5 expires last
	}
	all := members(t, ctx, r, group)
	for _, tt := range []struct {
		limit int
		first []string
		want  []string
		more  int
	}{
		{2, nil, []string{"proc-4", "proc-5"}, 3},
		{2, []string{"id-1"}, []string{"proc-1", "proc-5"}, 3},
		{3, []string{"id-2", "id-1", "nobody"}, []string{"proc-1", "proc-2", "proc-5"}, 2},
		{10, nil, names(all), 0},
	} {
		got, err := ml.MembersUpTo(ctx, group, tt.limit, tt.first...)
		if err != nil {
			t.Fatalf("MembersUpTo(%q, %d, %q): %v", group, tt.limit, tt.first, err)
		}
		if !slices.Equal(names(got.Members), tt.want) || got.More != tt.more {
			t.Errorf("MembersUpTo(%q, %d, %q) lists %q and %d more; want %q and %d more", group, tt.limit, tt.first, names(got.Members), got.More, tt.want, tt.more)
		}
		for _, m := range got.Members {
			i := slices.IndexFunc(all, func(a backend.Member) bool { return a.Name == m.Name })
			if i < 0 || all[i].Identity != m.Identity || string(all[i].Data) != string(m.Data) {
				t.Errorf("MembersUpTo lists %+v; Members lists no such member", m)
			}
		}
	}
	if _, err := ml.MembersUpTo(ctx, group, 0); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("MembersUpTo(%q, 0): err = %v; want ErrInvalidArgument", group, err)
	}
}
