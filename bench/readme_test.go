package bench

import (
	"encoding/json"
	"flag"
	"os"
	"testing"

	"github.com/baton-go/baton/internal/docgen"
)

var updateReadme = flag.Bool("update", false, "rewrite the top-level README's lock figures from results.json")

// The top-level README's lock figures (its Benchmarks section) and its
// measured comparison with the peers are ReadmeLockFigures and
// ReadmeComparison of results.json; with -update the test writes them
// there.
func TestReadmeFigures(t *testing.T) {
	data, err := os.ReadFile("results.json")
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	const how = "cd bench && go test -run TestReadmeFigures -update"
	docgen.Check(t, "../README.md", "lock figures", how, ReadmeLockFigures(&r), *updateReadme)
	docgen.Check(t, "../README.md", "measured comparison", how, ReadmeComparison(&r), *updateReadme)
}
