package main

import (
	"fmt"
	"slices"
)

// commandNames are the commands batonctl knows, sorted: those of the
// commands table, functions and help.
func commandNames() []string {
	names := []string{"functions", "help"}
	for name := range commands {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// didYouMean returns `; did you mean "X"?` for the known command X
// closest to name, when one is close enough to be a slip of the fingers:
// at most two edits away and at most half of name's letters (an edit
// is a letter added, dropped, changed, or two neighbours swapped); ""
// otherwise.
func didYouMean(name string) string {
	best, bestDist := "", 3
	for _, c := range commandNames() {
		if d := editDistance(name, c); d < bestDist && 2*d <= len([]rune(name)) {
			best, bestDist = c, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the number of edits that turn a into b: letters added,
// dropped or changed, and two neighbouring letters swapped (the optimal
// string alignment distance).
func editDistance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// d[i][j] is the distance between x[:i] and y[:j].
	d := make([][]int, len(x)+1)
	for i := range d {
		d[i] = make([]int, len(y)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(x); i++ {
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(x)][len(y)]
}
