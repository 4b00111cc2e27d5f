package synclock

import (
	"context"
	"reflect"
	"testing"
)

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

func TestCompilerNamed(t *testing.T) {
	tests := []struct {
		name, named string
		numbered    bool
	}{
		{"github.com/acme/billing/invoice.(*Service).Close", "", false},
		{"github.com/acme/billing/invoice.Close", "", false},
		{"github.com/acme/billing/invoice.Max[...]", "", false},
		{"github.com/acme/bill.v2/invoice.(*Service).Close", "", false},
		{"github.com/acme/billing/invoice.function1", "", false},
		{"github.com/acme/billing/invoice.func1", "", false},
		{"github.com/acme/billing/invoice.(*Service).Close.func1", "github.com/acme/billing/invoice.(*Service).Close", true},
		{"github.com/acme/billing/invoice.Close.func2.1", "github.com/acme/billing/invoice.Close", true},
		{"github.com/acme/billing/invoice.Close.gowrap1", "github.com/acme/billing/invoice.Close", true},
		{"github.com/acme/billing/invoice.Close.deferwrap3", "github.com/acme/billing/invoice.Close", true},
		{"github.com/acme/billing/invoice.Close-range1", "github.com/acme/billing/invoice.Close", true},
		{"github.com/acme/billing/invoice.init.func1", "github.com/acme/billing/invoice.init", true},
		{"github.com/acme/billing/invoice.glob..func1", "github.com/acme/billing/invoice.glob", true},
		{"main.main.func1", "main.main", true},
	}
	for _, tt := range tests {
		named, ok := compilerNamed(tt.name)
		if ok != tt.numbered || (ok && named != tt.named) {
			t.Errorf("compilerNamed(%q) = %q, %v; want %q, %v", tt.name, named, ok, tt.named, tt.numbered)
		}
	}
}

func closeAll(context.Context) error { return nil }

func (*service) Close(context.Context) error { return nil }

type closer interface{ Close(context.Context) error }

func TestFuncName(t *testing.T) {
	const pkg = "github.com/baton-go/baton/synclock."
	var iface closer = &service{}
	made := reflect.MakeFunc(reflect.TypeOf(closeAll), func([]reflect.Value) []reflect.Value {
		return []reflect.Value{reflect.Zero(reflect.TypeOf((*error)(nil)).Elem())}
	}).Interface().(func(context.Context) error)
	tests := []struct {
		name  string
		fn    func(context.Context) error
		want  string
		named bool
	}{
		{"function", closeAll, pkg + "closeAll", true},
		{"method value", (&service{}).Close, pkg + "(*service).Close", true},
		{"interface method value", iface.Close, pkg + "closer.Close", true},
		{"literal", func(context.Context) error { return nil }, "", false},
		{"made by reflect", made, "", false},
		{"nil", nil, "", false},
	}
	for _, tt := range tests {
		got, ok := funcName(tt.fn)
		if ok != tt.named || got != tt.want {
			t.Errorf("%s: funcName = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.named)
		}
	}
}
