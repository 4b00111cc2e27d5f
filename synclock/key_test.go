package synclock

import "testing"

type service struct{}

func (*service) close() (string, bool) { return callerKey(0) }

func (service) byValue() (string, bool) { return callerKey(0) }

func generic[T any]() (string, bool) { return callerKey(0) }

func withClosure() (string, bool) {
	f := func() (string, bool) { return callerKey(0) }
	return f()
}

func TestCallerKey(t *testing.T) {
	const pkg = "github.com/baton-go/baton/synclock."
	tests := []struct {
		name string
		get  func() (string, bool)
		want string
	}{
		{"pointer method", (&service{}).close, pkg + "(*service).close"},
		{"value method", service{}.byValue, pkg + "service.byValue"},
		{"generic function, int", generic[int], pkg + "generic[...]"},
		{"generic function, string", generic[string], pkg + "generic[...]"},
		{"closure", withClosure, pkg + "withClosure.func1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.get()
			if !ok || got != tt.want {
				t.Fatalf("callerKey = %q, %v; want %q", got, ok, tt.want)
			}
		})
	}
}
