// Package ctlline writes the batonctl command line that inspects what an
// example keeps in its store, for the examples to print, and reads it
// back out of their output, for their tests to run.
package ctlline

import (
	"errors"
	"fmt"
	"strings"
)

// Command is how a line starts: batonctl run from the repository's root,
// where the examples are run from.
const Command = "go run ./cmd/batonctl"

// Redis returns the line that shows the status of service tenant/app on
// the Redis at addr whose keys start with prefix.
func Redis(addr, prefix, tenant, app string) string {
	return line("--redis", addr, prefix, tenant, app)
}

// Consul returns the line that shows the status of service tenant/app on
// the Consul agent at addr whose keys start with prefix.
func Consul(addr, prefix, tenant, app string) string {
	return line("--consul", addr, prefix, tenant, app)
}

func line(flag, addr, prefix, tenant, app string) string {
	return fmt.Sprintf("%s %s %s --prefix %s --tenant %s --app %s status",
		Command, flag, quote(addr), quote(prefix), quote(tenant), quote(app))
}

// quote returns s as a shell word: itself when it has only characters
// no shell treats specially, else in single quotes.
func quote(s string) string {
	plain := s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.,:/@%+=") == ""
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Args finds the first line of output that holds a batonctl command
// line (Command and what follows it to the end of the line) and returns
// batonctl's arguments, as a shell would split them.
func Args(output string) ([]string, error) {
	for l := range strings.Lines(output) {
		if _, rest, ok := strings.Cut(l, Command+" "); ok {
			return split(strings.TrimSpace(rest))
		}
	}
	return nil, fmt.Errorf("no %q line in the output", Command)
}

// split splits s into shell words: separated by spaces, with single
// quotes around the parts that quote writes so, and a backslash before
// a quote outside them.
func split(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord, quoted, escaped := false, false, false
	for _, r := range s {
		switch {
		case escaped:
			w.WriteRune(r)
			escaped = false
		case r == '\\' && !quoted:
			escaped, inWord = true, true
		case r == '\'':
			quoted, inWord = !quoted, true
		case r == ' ' && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
			}
			inWord = false
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quoted || escaped {
		return nil, errors.New("ctlline: unterminated quote in " + s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}
