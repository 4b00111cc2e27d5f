package hook

import (
	"slices"
	"testing"
)

func TestJoin(t *testing.T) {
	var got []string
	f := Join(Join(nil, func(s string) { got = append(got, "a"+s) }), func(s string) { got = append(got, "b"+s) })
	f = Join(f, nil)
	f("1")
	if want := []string{"a1", "b1"}; !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	if Join[int](nil, nil) != nil {
		t.Fatal("Join(nil, nil) is not nil")
	}
	n := 0
	g := Join0(Join0(func() { n++ }, nil), func() { n += 10 })
	g()
	if n != 11 {
		t.Fatalf("Join0 ran to %d, want 11", n)
	}
	if Join0(nil, nil) != nil {
		t.Fatal("Join0(nil, nil) is not nil")
	}
}
