package docgen

import (
	"os"
	"path/filepath"
	"testing"
)

const doc = "# Title\n\ntext\n\n<!-- begin figures: generated; make figures rewrites it -->\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n<!-- end figures -->\n\nmore text\n"

func TestPart(t *testing.T) {
	part, start, end, err := Part(doc, "figures")
	if err != nil {
		t.Fatal(err)
	}
	if want := "| a | b |\n|---|---|\n| 1 | 2 |\n"; part != want || doc[start:end] != want {
		t.Errorf("Part = %q; want %q", part, want)
	}
	if part, _, _, err := Part("<!-- begin figures: generated; x rewrites it -->\n\n<!-- end figures -->\n", "figures"); err != nil || part != "" {
		t.Errorf("an empty part: Part = %q, %v; want it empty", part, err)
	}
	for name, d := range map[string]string{
		"no begin":       "text\n<!-- end figures -->\n",
		"no blank line":  "<!-- begin figures: generated; x rewrites it -->\n| a |\n\n<!-- end figures -->\n",
		"no end":         "<!-- begin figures: generated; x rewrites it -->\n\n| a |\n",
		"begin unclosed": "<!-- begin figures: generated\n\n| a |\n",
	} {
		if _, _, _, err := Part(d, "figures"); err == nil {
			t.Errorf("%s: Part found a part in %q", name, d)
		}
	}
}

func TestCheckUpdate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	Check(t, path, "figures", "make figures", "| a | b |\n|---|---|\n| 1 | 2 |\n", false) // in step: passes

	want := "| a | b |\n|---|---|\n| 3 | 4 |\n"
	Check(t, path, "figures", "go test -run X -update", want, true)
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	wantDoc := "# Title\n\ntext\n\n<!-- begin figures: generated; go test -run X -update rewrites it -->\n\n" + want + "\n<!-- end figures -->\n\nmore text\n"
	if string(got) != wantDoc {
		t.Errorf("after update the file reads\n%s\nwant\n%s", got, wantDoc)
	}
	Check(t, path, "figures", "go test -run X -update", want, false)
}

// recorder is a testing.TB that records a failure instead of ending the
// test.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}
func (r *recorder) Fatal(args ...any) { r.Fatalf("%v", args...) }

func TestCheckFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ how, want string }{
		"another figure": {"make figures", "| a | b |\n|---|---|\n| 1 | 3 |\n"},
		"another length": {"make figures", "| a | b |\n|---|---|\n"},
		"another how":    {"make other", "| a | b |\n|---|---|\n| 1 | 2 |\n"},
	} {
		r := &recorder{TB: t}
		func() {
			defer func() {
				if p := recover(); p != nil && p != r {
					panic(p)
				}
			}()
			Check(r, path, "figures", c.how, c.want, false)
		}()
		if r.failed == "" {
			t.Errorf("%s: Check passed", name)
		}
	}
}

func TestReadJSON(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.json"), filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(`{"ops": 12}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"ops": `), 0o644); err != nil {
		t.Fatal(err)
	}
	var v struct{ Ops int }
	ReadJSON(t, good, &v)
	if v.Ops != 12 {
		t.Errorf("ReadJSON of %s gave %+v; want Ops 12", good, v)
	}
	for _, path := range []string{bad, filepath.Join(dir, "missing.json")} {
		r := &recorder{TB: t}
		func() {
			defer func() {
				if p := recover(); p != nil && p != r {
					panic(p)
				}
			}()
			ReadJSON(r, path, &v)
		}()
		if r.failed == "" {
			t.Errorf("ReadJSON of %s passed", path)
		}
	}
}
