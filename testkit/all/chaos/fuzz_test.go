package chaos

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func FuzzReadHistory(f *testing.F) {
	f.Add(`{"kind":"write","node":"n1.0","op":3,"start":1795537382001050995,"res":"counter","token":17,"value":4,"result":"invoke"}` + "\n" + `{"kind":"master","node":"n2.1","start":1,"end":2,"token":9}` + "\n")
	f.Add(`{"kind":"start","node":"n1.0","pid":12}` + "\n" + `{"kind":"wri`)
	f.Add("not json\n{}\n")
	f.Fuzz(func(t *testing.T, text string) {
		events, err := Read(strings.NewReader(text))
		if err != nil {
			return
		}
		// What Read accepted writes back and reads again the same.
		var buf bytes.Buffer
		for _, e := range events {
			b, err := json.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(append(b, '\n'))
		}
		again, err := Read(&buf)
		if err != nil || len(again) != len(events) {
			t.Fatalf("re-read of %d events: %d, %v", len(events), len(again), err)
		}
		for i := range events {
			if again[i] != events[i] {
				t.Fatalf("event %d: %+v became %+v", i, events[i], again[i])
			}
		}
	})
}

func FuzzParseLogEntry(f *testing.F) {
	f.Add("counter 1795537379490096 n1.0 n1.0/w1-1 1 0 1795537379503654")
	f.Add("job 12 n3.1 n3.1/job-4 0 1795537382000 1795537382000548")
	f.Add("role x n1 h 0 0 1")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := parseLogEntry(s)
		if err != nil {
			return
		}
		if e.Kind != KindAccepted || e.Resource == "" || e.Node == "" || e.Holding == "" {
			t.Fatalf("%q parsed to %+v", s, e)
		}
		line := strings.Join([]string{e.Resource, strconv.FormatUint(e.Token, 10), e.Node, e.Holding,
			strconv.FormatInt(e.Value, 10), strconv.FormatInt(e.Fire, 10), strconv.FormatInt(e.Start/1000, 10)}, " ")
		again, err := parseLogEntry(line)
		if err != nil || again != e {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, e, line, again, err)
		}
	})
}
