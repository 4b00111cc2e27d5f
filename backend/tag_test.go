package backend_test

import (
	"errors"
	"testing"

	"github.com/baton-go/baton/backend"
)

func TestHashTag(t *testing.T) {
	for key, want := range map[string]string{
		backend.AppKey("acme", "billing", "lock", "x"): "{acme:billing}",
		"plain":         "",
		"{}x{a}":        "",
		"x{a}y{b}":      "{a}",
		"{open":         "",
		"a{acme:b}:{c}": "{acme:b}",
	} {
		if got := backend.HashTag(key); got != want {
			t.Errorf("HashTag(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestValidateTagName(t *testing.T) {
	if err := backend.ValidateTagName("tenant", "acme-1.ü"); err != nil {
		t.Errorf("a good name: %v", err)
	}
	for _, bad := range []string{"", "ac:me", "{acme", "acme}", "ac me", "ac\x1bme", "ac\nme"} {
		if err := backend.ValidateTagName("tenant", bad); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("ValidateTagName(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
}
