package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// parseProperties reads a Java .properties file as java.util.Properties
// does, into a flat map of dotted keys to string values:
//
//   - a line whose first non-blank character is '#' or '!' is a comment;
//     blank lines are skipped; leading spaces, tabs and form feeds are
//     skipped on every line;
//   - the key ends at the first unescaped '=', ':' or blank; blanks around
//     the separator are skipped, and the rest of the line is the value
//     (trailing blanks kept), so "key=value", "key: value" and
//     "key value" are all one entry;
//   - a line that ends in an odd number of backslashes goes on on the next
//     line, whose leading blanks are dropped (a comment line does not go
//     on);
//   - escapes: \t, \n, \r, \f, \uXXXX, and a backslash before any other
//     character stands for that character ("\=", "\:", "\ ", "\\");
//   - a key given twice keeps its last value.
//
// Spring's list syntax, "key[0]=a" and "key[1]=b", makes a list. The text
// is read as UTF-8, as Spring Boot and Java 9's resource bundles do; if it
// is not valid UTF-8 it is read as ISO-8859-1, the encoding of
// Properties.load(InputStream).
func parseProperties(data []byte) (map[string]any, error) {
	out := map[string]any{}
	lists := map[string]map[int]string{}
	lines := splitLines(propertiesText(data))
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		line := strings.TrimLeft(lines[i], " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		line, i = joinContinued(line, lines, i)
		key, value, err := propertyEntry(line, lineNo)
		if err != nil {
			return nil, err
		}
		if name, index, ok := listItem(key); ok {
			if lists[name] == nil {
				lists[name] = map[int]string{}
			}
			lists[name][index] = value
			continue
		}
		out[key] = value
	}
	if err := addLists(out, lists); err != nil {
		return nil, err
	}
	return out, nil
}

// propertiesText decodes a .properties file: UTF-8 if it is valid UTF-8,
// else ISO-8859-1, without a leading byte order mark.
func propertiesText(data []byte) string {
	text := string(data)
	if !utf8.Valid(data) {
		runes := make([]rune, len(data))
		for i, b := range data {
			runes[i] = rune(b)
		}
		text = string(runes)
	}
	return strings.TrimPrefix(text, "\uFEFF")
}

// joinContinued joins to line, read from lines[i], the lines it goes on
// on. It returns the logical line and the index of its last physical line.
func joinContinued(line string, lines []string, i int) (string, int) {
	for continues(line) && i+1 < len(lines) {
		i++
		line = line[:len(line)-1] + strings.TrimLeft(lines[i], " \t\f")
	}
	if continues(line) { // a continuation at the end of the file
		line = line[:len(line)-1]
	}
	return line, i
}

// propertyEntry splits a logical line into its key and value and resolves
// their escapes; lineNo names the line in an error.
func propertyEntry(line string, lineNo int) (key, value string, err error) {
	rawKey, rawValue := splitEntry(line)
	key, err = unescapeProperty(rawKey)
	if err != nil {
		return "", "", fmt.Errorf("line %d: key: %v", lineNo, err)
	}
	value, err = unescapeProperty(rawValue)
	if err != nil {
		return "", "", fmt.Errorf("line %d: value of %s: %v", lineNo, key, err)
	}
	return key, value, nil
}

// addLists puts each list of Spring's "key[0]=a" syntax into out as a
// list, in index order; the indexes must run from 0 without gaps and the
// name must not also be set as a plain value.
func addLists(out map[string]any, lists map[string]map[int]string) error {
	for name, items := range lists {
		if _, dup := out[name]; dup {
			return fmt.Errorf("%s is set both as a value and as a list (%s[0]=...)", name, name)
		}
		indexes := make([]int, 0, len(items))
		for i := range items {
			indexes = append(indexes, i)
		}
		sort.Ints(indexes)
		list := make([]any, len(indexes))
		for j, i := range indexes {
			if i != j {
				return fmt.Errorf("%s[%d] is missing: list items must be numbered from 0 without gaps", name, j)
			}
			list[j] = items[i]
		}
		out[name] = list
	}
	return nil
}

// splitLines splits text at "\n", "\r\n" and "\r".
func splitLines(text string) []string {
	text = strings.ReplaceAll(text, "\r\n", "\n")
	return strings.Split(strings.ReplaceAll(text, "\r", "\n"), "\n")
}

// continues reports whether line ends in an odd number of backslashes.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitEntry splits a logical line into its raw (still escaped) key and
// value.
func splitEntry(line string) (key, value string) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++ // the escaped character belongs to the key
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	rest := strings.TrimLeft(line[end:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return line[:end], rest
}

// unescapeProperty resolves the escapes of a key or value.
func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			break // a lone trailing backslash: Java drops it
		}
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, n, err := unicodeEscape(s[i-1:])
			if err != nil {
				return "", err
			}
			b.WriteRune(r)
			i += n - 2
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r)
			i += size - 1
		}
	}
	return b.String(), nil
}

// unicodeEscape decodes the \uXXXX escape at the start of s, and the low
// surrogate's escape after it if the first is a high surrogate (Java
// strings are UTF-16). It returns the rune and how many bytes it used.
func unicodeEscape(s string) (rune, int, error) {
	hex4 := func(s string) (rune, bool) {
		if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(s[2:6], 16, 16)
		return rune(n), err == nil
	}
	r, ok := hex4(s)
	if !ok {
		return 0, 0, fmt.Errorf(`malformed \u escape %q: want four hex digits`, s[:min(len(s), 6)])
	}
	if utf16.IsSurrogate(r) {
		if low, ok := hex4(s[6:]); ok {
			if c := utf16.DecodeRune(r, low); c != utf8.RuneError {
				return c, 12, nil
			}
		}
		return utf8.RuneError, 6, nil
	}
	return r, 6, nil
}

// listItem parses Spring's list syntax: "name[3]" is item 3 of name.
func listItem(key string) (name string, index int, ok bool) {
	if !strings.HasSuffix(key, "]") {
		return "", 0, false
	}
	open := strings.LastIndexByte(key, '[')
	if open <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(key[open+1 : len(key)-1])
	if err != nil || n < 0 || n > 1<<16 {
		return "", 0, false
	}
	return key[:open], n, true
}
