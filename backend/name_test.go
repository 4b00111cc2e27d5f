package backend_test

import (
	"testing"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
)

func TestStoreName(t *testing.T) {
	if got := backend.StoreName(membackend.New()); got != "membackend" {
		t.Errorf("StoreName(membackend.New()) = %q, want membackend", got)
	}
	if got := backend.StoreName(nil); got != "" {
		t.Errorf("StoreName(nil) = %q, want empty", got)
	}
}
