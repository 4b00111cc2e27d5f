package config

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Load reads the sources in order, each overriding the keys the earlier
// ones set, applies Default to the keys none sets, and validates the
// result. Values are converted the same way whatever the source: a string
// may stand for a bool, a number or a list, so files, maps and the
// environment accept the same text.
//
// Load reports every problem it finds in one *Error (which wraps
// ErrInvalid): each unknown key in any source, each value of the wrong
// type, and each value or combination of values the rules in the package
// documentation forbid. A source that cannot be read or parsed stops Load
// at once with that error. Load without sources returns Default().
func Load(sources ...Source) (*Config, error) {
	l := loader{
		merged: map[string]any{},
		origin: map[string]string{},
	}
	for i, s := range sources {
		if s.read == nil {
			return nil, fmt.Errorf("config: source %d is the zero Source; make sources with File, Env, Map or Bytes", i)
		}
		d, err := s.read()
		if err != nil {
			return nil, err
		}
		l.problems = append(l.problems, d.problems...)
		l.ignored = append(l.ignored, d.ignored...)
		flat := map[string]any{}
		origin := d.origin
		l.flatten(reflect.ValueOf(d.values), "", flat, origin)
		// Only known keys reach the merge, each a leaf: a later
		// source's value replaces an earlier one's.
		for key, v := range flat {
			l.merged[key] = v
			l.origin[key] = origin(key)
		}
	}

	c := Default()
	st := &state{set: map[string]bool{}, bad: map[string]bool{}, origin: l.origin}
	for i := range keys {
		k := &keys[i]
		raw, ok := l.merged[k.name]
		if !ok {
			continue
		}
		v, reason := convert(k, raw)
		if reason != "" {
			st.bad[k.name] = true
			l.problems = append(l.problems, Problem{Key: k.name, Value: showRaw(k, raw), Origin: l.origin[k.name], Reason: reason})
			continue
		}
		k.set(&c, v)
		st.set[k.name] = true
	}
	problems := append(l.problems, check(&c, st)...)
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	c.ignored = sortedUnique(l.ignored)
	logIgnored(c.ignored)
	return &c, nil
}

// loader holds the state of one Load.
type loader struct {
	merged   map[string]any    // the known keys of all sources so far, by dotted name
	origin   map[string]string // key -> where its current value came from
	problems []Problem
	ignored  []string // keys Spring sources were asked to ignore and did
}

// flatten walks a source's nested map v and stores the value of every
// known key under its dotted name in out. Keys may be nested, dotted, or
// both ({"redis": {"tls": true}}, {"redis.tls": true}), and spelled as
// Spring's relaxed binding allows (redis.keyPrefix, redis.key_prefix). It reports unknown
// keys, scalars where a section's keys belong, maps where a value
// belongs, and keys set twice.
func (l *loader) flatten(v reflect.Value, path string, out map[string]any, origin func(string) string) {
	type entry struct {
		name string
		val  any
	}
	var entries []entry
	iter := v.MapRange()
	for iter.Next() {
		name := fmt.Sprint(iter.Key().Interface())
		if path != "" {
			name = path + "." + name
		}
		entries = append(entries, entry{name, iter.Value().Interface()})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })

	for _, e := range entries {
		if e.val == nil {
			continue // null sets nothing
		}
		rv := reflect.ValueOf(e.val)
		isMap := rv.Kind() == reflect.Map
		src := origin(e.name)
		written := e.name
		e.name = canonical(e.name) // redis.keyPrefix is redis.key-prefix
		switch k, known := keyIndex[e.name]; {
		case known && isMap:
			l.problems = append(l.problems, Problem{Key: e.name, Value: showRaw(k, e.val), Origin: src,
				Reason: "must be " + k.kind.what() + ", not a map"})
		case known:
			if prev, dup := out[e.name]; dup {
				l.problems = append(l.problems, Problem{Key: e.name, Value: showRaw(k, prev) + " and " + showRaw(k, e.val), Origin: src,
					Reason: "is set twice in one source (as a nested and a dotted key)"})
				continue
			}
			out[e.name] = e.val
		case sections[e.name] && isMap:
			l.flatten(rv, e.name, out, origin)
		case sections[e.name]:
			l.problems = append(l.problems, Problem{Key: e.name, Value: show(e.val), Origin: src,
				Reason: "is a section, not a value; set the keys under it, such as " + firstKeyUnder(e.name)})
		default:
			l.problems = append(l.problems, unknownKey(written, e.val, src))
		}
	}
}

// unknownKey is the problem of a key no table entry has.
func unknownKey(name string, val any, origin string) Problem {
	reason := "unknown key"
	candidates := Keys()
	for s := range sections {
		candidates = append(candidates, s)
	}
	sort.Strings(candidates)
	value := show(val)
	s := suggest(name, candidates)
	if s == "" { // a typo in a relaxed spelling, such as redis.keyPrefx
		forms := make([]string, len(candidates))
		for i, c := range candidates {
			forms[i] = relaxedName(c)
		}
		if r := suggest(relaxedName(name), forms); r != "" {
			s = relaxed[r]
		}
	}
	if s != "" {
		reason += "; did you mean " + s + "?"
		if k, ok := keyIndex[s]; ok && k.secret {
			value = redact(value)
		}
	} else if looksSpring(name) {
		reason += "; a Spring Boot file loads as it is with config.Spring(config.File(...))"
	}
	if looksSecret(name) {
		value = redact(value)
	}
	return Problem{Key: name, Value: value, Origin: origin, Reason: reason}
}

// firstKeyUnder returns the first key in the section name.
func firstKeyUnder(name string) string {
	for _, k := range keys {
		if strings.HasPrefix(k.name, name+".") {
			return k.name
		}
	}
	return ""
}

// showRaw formats a raw value of k for a message, redacting secrets.
func showRaw(k *key, v any) string {
	if k.secret {
		if s, ok := v.(string); ok && s == "" {
			return `""`
		}
		return redacted
	}
	return show(v)
}

// convert turns a raw value of key k into the representation k.set takes:
// bool, int64 (a count of the kind's unit for durations), string or
// []string. It returns a reason instead if the value does not fit.
func convert(k *key, raw any) (any, string) {
	switch k.kind {
	case kindBool:
		return toBool(raw)
	case kindInt:
		n, reason := toInt(raw)
		if reason == "is too large" {
			return nil, reason
		}
		if reason != "" {
			return nil, "must be a whole number"
		}
		if n < math.MinInt || n > math.MaxInt {
			return nil, "is too large"
		}
		return n, ""
	case kindMillis, kindSeconds:
		return toCount(k.kind, raw)
	case kindList:
		return toList(raw)
	case kindDuration:
		return toDuration(raw)
	default:
		return toString(raw)
	}
}

// toBool converts a bool, or a string as Spring converts one (true, on,
// yes, 1 and false, off, no, 0, in any case) or as strconv.ParseBool
// reads one (t, f).
func toBool(raw any) (any, string) {
	switch v := raw.(type) {
	case bool:
		return v, ""
	case string:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "on", "yes", "1", "t":
			return true, ""
		case "false", "off", "no", "0", "f":
			return false, ""
		}
	}
	return nil, "must be " + kindBool.what()
}

// toDuration converts a duration written as text in Go's form or
// ISO-8601 (ParseDuration), or a time.Duration from a Map.
func toDuration(raw any) (any, string) {
	if d, ok := raw.(time.Duration); ok {
		if d < 0 {
			return nil, "must not be negative"
		}
		return d, ""
	}
	s, ok := raw.(string)
	if !ok {
		if n, reason := toInt(raw); reason == "" && n == 0 {
			return time.Duration(0), ""
		}
		return nil, "must be " + kindDuration.what() + ", with its unit (a number alone is ambiguous)"
	}
	d, err := ParseDuration(strings.TrimSpace(s))
	if err != nil {
		var de *durationError
		if errors.As(err, &de) {
			return nil, de.reason
		}
		return nil, err.Error()
	}
	return d, ""
}

// durationType is the type of time.Duration, which a Map may hold where a
// count of milliseconds or seconds belongs.
var durationType = reflect.TypeFor[time.Duration]()

// toInt converts a whole number of any Go integer type, a float without a
// fraction (JSON numbers), or a decimal string.
func toInt(raw any) (int64, string) {
	rv := reflect.ValueOf(raw)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), ""
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if u := rv.Uint(); u <= math.MaxInt64 {
			return int64(u), ""
		}
		return 0, "is too large"
	case reflect.Float32, reflect.Float64:
		f := rv.Float()
		if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, "is not whole"
		}
		if f < -(1<<63) || f >= 1<<63 {
			return 0, "is too large"
		}
		return int64(f), ""
	case reflect.String:
		n, err := strconv.ParseInt(strings.TrimSpace(rv.String()), 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return 0, "is too large"
			}
			return 0, "is not a number"
		}
		return n, ""
	}
	return 0, "is not a number"
}

// toCount converts a whole number of the kind's unit and checks that it
// fits in a time.Duration.
func toCount(kd kind, raw any) (any, string) {
	unit := kd.unit()
	unitName := "milliseconds"
	if unit == time.Second {
		unitName = "seconds"
	}
	if reflect.TypeOf(raw) == durationType {
		d := raw.(time.Duration)
		return nil, "is a time.Duration; give " + kd.what() + hint(d, unit)
	}
	n, reason := toInt(raw)
	if reason == "is too large" || (reason == "" && (n > math.MaxInt64/int64(unit) || n < math.MinInt64/int64(unit))) {
		return nil, "is too large for a duration in " + unitName
	}
	if reason != "" {
		if s, ok := raw.(string); ok {
			if d, err := ParseDuration(strings.TrimSpace(s)); err == nil {
				return nil, "must be " + kd.what() + ", not a duration" + hint(d, unit)
			}
		}
		return nil, "must be " + kd.what()
	}
	return n, ""
}

// hint suggests how to write d as a count of unit.
func hint(d, unit time.Duration) string {
	if d%unit != 0 {
		return ""
	}
	return fmt.Sprintf(" (write %d for %v)", int64(d/unit), d)
}

func toString(raw any) (any, string) {
	if s, ok := raw.(string); ok {
		return s, ""
	}
	rv := reflect.ValueOf(raw)
	switch rv.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return nil, "must be a string; quote the value"
	case reflect.String:
		return rv.String(), "" // a named string type from a Map
	}
	return nil, "must be a string"
}

// toList converts a list of strings, or a string of comma-separated
// items. Items are trimmed of spaces; an empty item is an error.
func toList(raw any) (any, string) {
	var items []string
	rv := reflect.ValueOf(raw)
	switch rv.Kind() {
	case reflect.String:
		if strings.TrimSpace(rv.String()) == "" {
			return []string{}, ""
		}
		items = strings.Split(rv.String(), ",")
	case reflect.Slice, reflect.Array:
		items = make([]string, rv.Len())
		for i := range rv.Len() {
			e := rv.Index(i)
			for e.Kind() == reflect.Interface && !e.IsNil() {
				e = e.Elem()
			}
			if e.Kind() != reflect.String {
				return nil, "must be " + kindList.what() + fmt.Sprintf("; item %d is not a string", i+1)
			}
			items[i] = e.String()
		}
	default:
		return nil, "must be " + kindList.what()
	}
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
		if items[i] == "" {
			return nil, fmt.Sprintf("item %d is empty", i+1)
		}
	}
	return items, ""
}
