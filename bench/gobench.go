package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// GoBenchmarks is the output of go test -bench in its text format (the
// one benchstat reads; see go.dev/design/14313-benchmark-data):
// configuration lines "key: value" and result lines
//
//	BenchmarkName/sub-2   1000   25.8 ns/op   0 allocs/op
//
// that is, a name with the GOMAXPROCS suffix, the iterations and pairs of
// value and unit. Every other line (PASS, ok, a benchmark's log) is
// skipped. bench/gobench.txt, which make bench-role PUBLISH=1 writes, is one: the
// README's table of Go figures is rendered from it (ReadmeGoFigures).
type GoBenchmarks struct {
	// Config holds the value each configuration key was given last: goos,
	// goarch, pkg and cpu from go test; date, redis-server, go and
	// benchtime from make bench-role.
	Config map[string]string
	// Results are the result lines in the order of the file.
	Results []GoResult
}

// GoResult is one result line.
type GoResult struct {
	// Name is the benchmark's name without its GOMAXPROCS suffix, with its
	// sub-benchmarks: "BenchmarkFleet/config".
	Name string
	// Procs is GOMAXPROCS, from the suffix; 1 when there is none (go test
	// leaves it out then).
	Procs  int
	Iters  int64
	Values map[string]float64 // by unit: "ns/op", "handover-p50-ms"
}

// ReadGoBenchmarks reads the file at path (ParseGoBenchmarks).
func ReadGoBenchmarks(path string) (*GoBenchmarks, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	g, err := ParseGoBenchmarks(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// ParseGoBenchmarks reads benchmark results in go test's text format. A
// line that starts with "Benchmark" but is not a whole result line is an
// error naming its line number: a result must not be lost unseen.
func ParseGoBenchmarks(r io.Reader) (*GoBenchmarks, error) {
	g := &GoBenchmarks{Config: map[string]string{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "Benchmark") {
			res, err := parseResult(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			g.Results = append(g.Results, res)
			continue
		}
		if key, value, ok := configLine(line); ok {
			g.Config[key] = value
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return g, nil
}

// configLine splits a configuration line: a key that starts with a
// lower-case letter and holds neither blanks nor upper-case letters, a
// colon, and the value after a blank (or nothing).
func configLine(line string) (key, value string, ok bool) {
	key, value, ok = strings.Cut(line, ":")
	if !ok || key == "" || key[0] < 'a' || key[0] > 'z' {
		return "", "", false
	}
	if strings.ContainsFunc(key, func(r rune) bool { return r == ' ' || r == '\t' || (r >= 'A' && r <= 'Z') }) {
		return "", "", false
	}
	if value != "" && value[0] != ' ' && value[0] != '\t' {
		return "", "", false
	}
	return key, strings.TrimSpace(value), true
}

func parseResult(line string) (GoResult, error) {
	f := strings.Fields(line)
	if len(f) < 4 || len(f)%2 != 0 {
		return GoResult{}, fmt.Errorf("%q is not a result line (name, iterations, then pairs of value and unit)", line)
	}
	res := GoResult{Name: f[0], Procs: 1, Values: map[string]float64{}}
	if i := strings.LastIndexByte(f[0], '-'); i > 0 {
		if p, err := strconv.Atoi(f[0][i+1:]); err == nil && p > 0 {
			res.Name, res.Procs = f[0][:i], p
		}
	}
	iters, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || iters <= 0 {
		return GoResult{}, fmt.Errorf("%s: iterations %q are not a positive whole number", f[0], f[1])
	}
	res.Iters = iters
	for i := 2; i < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return GoResult{}, fmt.Errorf("%s: value %q of %s is not a number", f[0], f[i], f[i+1])
		}
		if _, dup := res.Values[f[i+1]]; dup {
			return GoResult{}, fmt.Errorf("%s: unit %s given twice", f[0], f[i+1])
		}
		res.Values[f[i+1]] = v
	}
	return res, nil
}

// Value returns the value in unit of the benchmark name (without its
// GOMAXPROCS suffix): the median over its result lines when it ran more
// than once (-count). It is an error when no line has the benchmark, or
// none of them the unit.
func (g *GoBenchmarks) Value(name, unit string) (float64, error) {
	var vs []float64
	seen := false
	for _, r := range g.Results {
		if r.Name != name {
			continue
		}
		seen = true
		if v, ok := r.Values[unit]; ok {
			vs = append(vs, v)
		}
	}
	switch {
	case !seen:
		return 0, fmt.Errorf("no result of %s", name)
	case len(vs) == 0:
		return 0, fmt.Errorf("%s reports no %s", name, unit)
	}
	slices.Sort(vs)
	m := len(vs) / 2
	if len(vs)%2 == 0 {
		return (vs[m-1] + vs[m]) / 2, nil
	}
	return vs[m], nil
}
