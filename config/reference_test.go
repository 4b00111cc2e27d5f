package config

import (
	"flag"
	"reflect"
	"strings"
	"testing"

	"github.com/baton-go/baton/internal/docgen"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md's reference table from Reference")

// The reference table of docs/configuration.md (which the README links
// to) is ReferenceTable("BATON_"), byte for byte; with -update the test
// writes it there.
func TestReadmeReference(t *testing.T) {
	docgen.Check(t, "../docs/configuration.md", "configuration reference", "go test ./config -run TestReadmeReference -update",
		ReferenceTable("BATON_"), *update)
}

// Every key is documented, and a default written as one literal is the
// value Default gives the key ("none": the zero value). Defaults derived
// from other keys or from the environment are words, which the test
// cannot check.
func TestReferenceDefaults(t *testing.T) {
	if len(keyDocs) != len(keys) {
		t.Errorf("keyDocs documents %d keys, there are %d", len(keyDocs), len(keys))
	}
	dflt := Default()
	for i := range keys {
		k := &keys[i]
		d, ok := keyDocs[k.name]
		if !ok || d.def == "" || d.doc == "" {
			t.Errorf("key %s: no default or meaning in keyDocs", k.name)
			continue
		}
		shown := shownValue(k, &dflt)
		switch lit, isLit := strings.CutPrefix(d.def, "`"); {
		case d.def == "none":
			if !reflect.DeepEqual(k.get(&dflt), k.get(&Config{})) {
				t.Errorf("key %s: documented without a default, but Default gives %s", k.name, shown)
			}
		case isLit && strings.Count(d.def, "`") == 2 && strings.HasSuffix(lit, "`"):
			if lit = strings.TrimSuffix(lit, "`"); lit != shown {
				t.Errorf("key %s: documented default %s, Default gives %s", k.name, lit, shown)
			}
		}
	}
}
