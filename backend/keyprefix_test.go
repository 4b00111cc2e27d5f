package backend_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/baton-go/baton/backend"
)

func TestValidateKeyPrefix(t *testing.T) {
	for _, p := range []string{"baton", "svc-1", "team_a.prod:baton", "acme/baton", strings.Repeat("p", backend.MaxKeyPrefixLen)} {
		if err := backend.ValidateKeyPrefix(p); err != nil {
			t.Errorf("ValidateKeyPrefix(%q): %v; want nil", p, err)
		}
	}
	for p, refused := range map[string]string{
		"bat[on": "'['", "b?ton": "'?'", "svc*": "'*'", "a\\b": "'\\\\'", "a^b": "'^'", "a]": "']'",
		"{baton}": "'{'", "bat on": "' '", "bat\non": "'\\n'", "bätön": "'ä'",
	} {
		err := backend.ValidateKeyPrefix(p)
		if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), "holds "+refused) {
			t.Errorf("ValidateKeyPrefix(%q) = %v; want ErrInvalidArgument naming %s", p, err, refused)
		}
	}
	for _, p := range []string{"", strings.Repeat("p", backend.MaxKeyPrefixLen+1)} {
		if err := backend.ValidateKeyPrefix(p); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("ValidateKeyPrefix(%.20q) = %v; want ErrInvalidArgument", p, err)
		}
	}
}
