package lease

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/baton-go/baton/backend"
)

func TestFloorRisesOnly(t *testing.T) {
	var f Floor
	for _, tok := range []uint64{5, 3, 9, 7} {
		f.Observe(tok)
	}
	if got := f.Load(); got != 9 {
		t.Fatalf("floor after 5, 3, 9, 7 = %d, want 9", got)
	}
}

func TestFloorForgetsOnlyARefusedFloor(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	var f Floor
	refused := fmt.Errorf("acquire: %w", backend.ErrFloorAhead)
	if f.Forget(refused, logger, "synclock", "k") {
		t.Fatal("Forget with no floor seen reported a floor to drop")
	}
	f.Observe(42)
	if f.Forget(errors.New("connection refused"), logger, "synclock", "k") || f.Load() != 42 {
		t.Fatalf("Forget of another error dropped the floor (now %d)", f.Load())
	}
	if !f.Forget(refused, logger, "synclock", "k") || f.Load() != 0 {
		t.Fatalf("Forget of ErrFloorAhead kept the floor (now %d)", f.Load())
	}
	if log := buf.String(); !strings.Contains(log, "synclock: the store refused the highest token seen") || !strings.Contains(log, "floor=42") || !strings.Contains(log, "key=k") {
		t.Fatalf("log does not say who, the key and the floor dropped: %q", log)
	}
}
