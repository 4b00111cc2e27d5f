package config

import (
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's configuration reference from Reference")

// The README's reference table is ReferenceTable("BATON_"), byte for
// byte; with -update the test writes it there.
func TestReadmeReference(t *testing.T) {
	const path = "../README.md"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	start := strings.Index(readme, "| Key | Default | Environment variable | Meaning |\n")
	if start < 0 {
		t.Fatalf("%s has no configuration reference table", path)
	}
	end := start + strings.Index(readme[start:], "\n\n") + 1
	want := ReferenceTable("BATON_")
	if got := readme[start:end]; got != want {
		if *update {
			if err := os.WriteFile(path, []byte(readme[:start]+want+readme[end:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s's reference differs from config.Reference at row %d:\nREADME: %s\nconfig: %s\n(run go test ./config -run TestReadmeReference -update)", path, i, gl[i], wl[i])
			}
		}
		t.Fatalf("%s's reference has %d rows, config.Reference %d (run go test ./config -run TestReadmeReference -update)", path, len(gl), len(wl))
	}
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
