package main

import "testing"

// A mistyped command gets the closest known one, by edit distance; a
// word far from every command gets none. batonctl had no suggestion.
func TestDidYouMean(t *testing.T) {
	for name, want := range map[string]string{
		"stauts":    `; did you mean "status"?`, // two letters swapped
		"mastr":     `; did you mean "master"?`,
		"memebers":  `; did you mean "members"?`,
		"relase":    `; did you mean "release"?`,
		"wach":      `; did you mean "watch"?`,
		"fucntions": `; did you mean "functions"?`,
		"stat":      `; did you mean "status"?`,
		"purge":     "",
		"x":         "",
		"ls":        "",
	} {
		if got := didYouMean(name); got != want {
			t.Errorf("didYouMean(%q) = %q; want %q", name, got, want)
		}
	}
	for a, b := range map[string]string{"": "abc", "abc": "abc", "ab": "ba", "kitten": "sitting"} {
		want := map[string]int{"": 3, "abc": 0, "ab": 1, "kitten": 3}[a]
		if got := editDistance(a, b); got != want {
			t.Errorf("editDistance(%q, %q) = %d; want %d", a, b, got, want)
		}
	}
}
