package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"go.yaml.in/yaml/v3"
)

// Format names the syntax of configuration bytes.
type Format string

// The formats File and Bytes understand.
const (
	YAML Format = "yaml"
	JSON Format = "json"
	TOML Format = "toml"
	// Properties is the Java .properties format, as Spring's
	// application.properties uses it: key=value lines, with the rules of
	// java.util.Properties (':' or a blank also separates, '#' and '!'
	// start comments, a trailing backslash continues a line, \uXXXX and
	// other escapes), and Spring's key[0]=... lists.
	Properties Format = "properties"
)

// Source is one place configuration is read from: a file, the environment,
// a map or bytes. Make one with File, Env, Map or Bytes and pass it to
// Load; the zero Source is not usable.
type Source struct {
	// read returns what the source holds. err is a failure that stops
	// Load.
	read func() (sourceData, error)
}

// sourceData is what a Source read: its values as a nested map, origin
// naming where a given key was read from, problems found while reading
// (unknown environment variables), and the keys it was asked to ignore
// and did (Spring).
type sourceData struct {
	values   map[string]any
	origin   func(key string) string
	problems []Problem
	ignored  []string
}

// File reads the file at path. Its format follows from the extension:
// .yaml or .yml for YAML, .json for JSON, .toml for TOML, .properties for
// Java properties, in any case; Load fails on any other extension. An
// empty file sets nothing. To read a Spring Boot application.yml or
// application.properties as it is, wrap it in Spring; to read baton's
// keys from one part of a larger file, in Sub.
func File(path string) Source {
	return Source{read: func() (sourceData, error) {
		format, err := formatOf(path)
		if err != nil {
			return sourceData{}, err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return sourceData{}, fmt.Errorf("config: %w", err)
		}
		origin := "file " + path
		m, err := parse(data, format)
		if err != nil {
			return sourceData{}, &syntaxError{origin: origin, err: err}
		}
		return sourceData{values: m, origin: func(string) string { return origin }}, nil
	}}
}

// Bytes reads data written in format (YAML, JSON, TOML or Properties, in
// any case; "yml" is YAML). Empty data sets nothing.
func Bytes(data []byte, format Format) Source {
	data = append([]byte(nil), data...)
	return Source{read: func() (sourceData, error) {
		f := Format(strings.ToLower(string(format)))
		if f == "yml" {
			f = YAML
		}
		switch f {
		case YAML, JSON, TOML, Properties:
		default:
			return sourceData{}, fmt.Errorf("config: unknown format %q (want yaml, json, toml or properties): %w", string(format), ErrInvalid)
		}
		m, err := parse(data, f)
		if err != nil {
			return sourceData{}, &syntaxError{origin: string(f) + " input", err: err}
		}
		return sourceData{values: m, origin: func(string) string { return "" }}, nil
	}}
}

// Map reads m, whose keys are configuration keys either nested
// ({"redis": {"db": 1}}) or flat with dots ({"redis.db": 1}), or a mix of
// the two. Maps of any string-keyed type are accepted. Values are what a
// parsed file would hold (bools, numbers, strings, lists of strings);
// strings are converted the same way as in files and the environment. A
// nil value sets nothing. Load does not modify m.
func Map(m map[string]any) Source {
	return Source{read: func() (sourceData, error) {
		return sourceData{values: m, origin: func(string) string { return "" }}, nil
	}}
}

// Env reads the environment variables whose names start with prefix (for
// example "BATON_"; a trailing '_' is added if prefix lacks one). Each sets
// the key whose name, upper-cased with '.' and '-' replaced by '_', is the
// rest of the variable's name: BATON_REDIS_KEY_PREFIX sets
// redis.key-prefix (see EnvName). Names are matched against the table of
// known keys, never guessed from the underscores. A variable with the
// prefix that matches no key is a problem Load reports. A variable set to
// the empty string is ignored, so that an unset deployment variable does
// not override a file. Values are strings, converted like strings in
// files: "true", "15000", and for redis.addrs a comma-separated list.
// prefix must not be empty.
func Env(prefix string) Source {
	return Source{read: func() (sourceData, error) {
		if prefix == "" || prefix == "_" {
			return sourceData{}, errors.New("config: Env needs a non-empty prefix such as \"BATON_\"")
		}
		p := envPrefix(prefix)
		vars := map[string]string{} // key -> variable name
		var problems []Problem
		values := map[string]any{} // dotted key -> value
		for _, kv := range os.Environ() {
			name, value, _ := strings.Cut(kv, "=")
			rest, ok := strings.CutPrefix(name, p)
			if !ok || value == "" {
				continue
			}
			def, ok := envSuffixes[rest]
			if !ok {
				problems = append(problems, unknownEnv(p, name, value))
				continue
			}
			vars[def.name] = name
			values[def.name] = value
		}
		sort.Slice(problems, func(i, j int) bool { return problems[i].Key < problems[j].Key })
		return sourceData{values: values, origin: func(key string) string { return "env " + vars[key] }, problems: problems}, nil
	}}
}

// envPrefix returns prefix with a trailing '_', or "" for "".
func envPrefix(prefix string) string {
	if prefix == "" || strings.HasSuffix(prefix, "_") {
		return prefix
	}
	return prefix + "_"
}

// unknownEnv is the problem of a variable with the prefix that names no key.
func unknownEnv(prefix, name, value string) Problem {
	suffix := strings.TrimPrefix(name, prefix)
	known := make([]string, 0, len(envSuffixes))
	for s := range envSuffixes {
		known = append(known, s)
	}
	sort.Strings(known)
	reason := "environment variable matches no config key"
	if s := suggest(suffix, known); s != "" {
		reason += "; did you mean " + prefix + s + "?"
		if envSuffixes[s].secret {
			value = redact(value)
		}
	}
	if looksSecret(suffix) {
		value = redact(value)
	}
	return Problem{Key: name, Value: shorten(value), Reason: reason}
}

// formatOf picks the format of a file from its extension.
func formatOf(path string) (Format, error) {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case ".yaml", ".yml":
		return YAML, nil
	case ".json":
		return JSON, nil
	case ".toml":
		return TOML, nil
	case ".properties":
		return Properties, nil
	default:
		return "", fmt.Errorf("config: file %s: unknown format %q (want .yaml, .yml, .json, .toml or .properties): %w", path, ext, ErrInvalid)
	}
}

// parse parses data in format f into a nested map. A parser that panics
// on hostile input is reported as a syntax error.
func parse(data []byte, f Format) (m map[string]any, err error) {
	if f == Properties {
		return parseProperties(data)
	}
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("%s parser failed: %v", f, r)
		}
	}()
	switch f {
	case YAML:
		err = yaml.Unmarshal(data, &m)
	case JSON:
		err = json.Unmarshal(data, &m)
	case TOML:
		err = toml.Unmarshal(data, &m)
	}
	if err != nil {
		return nil, err
	}
	if m == nil {
		m = map[string]any{}
	}
	stringKeys(m)
	return m, nil
}

// stringKeys turns, in place, every map below m whose keys are not all
// strings (YAML allows `1: x`) into a map keyed by the keys' text, so
// that flatten sees one shape of map whatever the format.
func stringKeys(m map[string]any) {
	for k, v := range m {
		m[k] = stringKeysOf(v)
	}
}

func stringKeysOf(v any) any {
	switch v := v.(type) {
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(k)] = e
		}
		stringKeys(out)
		return out
	case map[string]any:
		stringKeys(v)
	case []any:
		for i, e := range v {
			v[i] = stringKeysOf(e)
		}
	}
	return v
}

// syntaxError reports a source that could not be parsed. It wraps
// ErrInvalid and the parser's error.
type syntaxError struct {
	origin string
	err    error
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("config: %s: %v", e.origin, e.err)
}

func (e *syntaxError) Unwrap() []error { return []error{ErrInvalid, e.err} }

// Sub reads only the part of src under path, a dotted key such as "baton"
// or "acme.baton", and ignores the rest: baton's keys inside a larger
// file, as Spring's application.yml or application.properties holds the
// settings of every library beside the application's own.
//
//	config.Load(config.Sub("baton", config.File("application.yml")), config.Env("BATON_"))
//
// reads
//
//	spring:
//	  application:
//	    name: billing
//	baton:
//	  instance:
//	    app: billing
//	  scheduler-lock:
//	    enabled: yes
//
// as instance.app=billing and scheduler-lock.enabled=true, and never looks
// at spring.*. Under path the usual rules hold: unknown keys there are
// reported. The framework's own keys at the top level of the file
// (scheduler-lock.*, synchronized-lock.*) are reported too, rather than
// dropped without a word: move them under path, or read the whole file
// with Spring, which reads them where they are. The part may be nested, dotted ("baton.redis.db: 1", as
// properties files write it) or both. A source with nothing under path
// sets nothing. Sub does not apply to Env, whose prefix already selects
// baton's variables.
func Sub(path string, src Source) Source {
	return Source{read: func() (sourceData, error) {
		path := strings.Trim(path, ".")
		if path == "" {
			return sourceData{}, fmt.Errorf("config: Sub needs a path such as \"baton\": %w", ErrInvalid)
		}
		if src.read == nil {
			return sourceData{}, errors.New("config: Sub of the zero Source; make sources with File, Env, Map or Bytes")
		}
		d, err := src.read()
		if err != nil {
			return sourceData{}, err
		}
		out := map[string]any{}
		sub(d.values, path, out, &d.problems, d.origin)
		d.problems = append(d.problems, outside(d.values, path, d.origin)...)
		origin := d.origin
		d.values, d.origin = out, func(key string) string {
			o := origin(path + "." + key)
			if o == "" {
				return "under " + path
			}
			return o + " under " + path
		}
		return d, nil
	}}
}

// sub copies what m holds under path into out: m's entry path, its
// entries "path.<key>", and entries under a map whose key starts path.
func sub(m map[string]any, path string, out map[string]any, problems *[]Problem, origin func(string) string) {
	put := func(k string, v any) {
		if _, dup := out[k]; dup {
			*problems = append(*problems, Problem{Key: k, Value: show(v), Origin: origin(path+"."+k) + " under " + path,
				Reason: "is set twice in one source (as a nested and a dotted key)"})
			return
		}
		out[k] = v
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		switch {
		case k == path:
			nested, ok := asMap(v)
			if !ok {
				if v != nil {
					*problems = append(*problems, Problem{Key: path, Value: show(v), Origin: origin(path),
						Reason: "is a value, but baton's keys are expected under it"})
				}
				continue
			}
			for nk, nv := range nested {
				put(nk, nv)
			}
		case strings.HasPrefix(k, path+"."):
			put(k[len(path)+1:], v)
		case strings.HasPrefix(path, k+"."):
			if nested, ok := asMap(v); ok {
				sub(nested, path[len(k)+1:], out, problems, origin)
			}
		}
	}
}

// outside reports the framework's keys (scheduler-lock.*,
// synchronized-lock.*) at the top level of m, which Sub(path) would
// otherwise ignore without a word.
func outside(m map[string]any, path string, origin func(string) string) []Problem {
	var problems []Problem
	for k, v := range m {
		seg, _, _ := strings.Cut(k, ".")
		if r := relaxedName(seg); r != "schedulerlock" && r != "synchronizedlock" {
			continue
		}
		problems = append(problems, Problem{Key: k, Value: show(v), Origin: origin(k),
			Reason: fmt.Sprintf("is the framework's key, outside %s where Sub reads; move it under %s, or read the whole file with config.Spring, which reads it where it is", path, path)})
	}
	sort.Slice(problems, func(i, j int) bool { return problems[i].Key < problems[j].Key })
	return problems
}

// asMap returns v as a map with string keys, if it is a map of any
// type.
func asMap(v any) (map[string]any, bool) {
	if m, ok := v.(map[string]any); ok {
		return m, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Map {
		return nil, false
	}
	out := make(map[string]any, rv.Len())
	iter := rv.MapRange()
	for iter.Next() {
		out[fmt.Sprint(iter.Key().Interface())] = iter.Value().Interface()
	}
	return out, true
}
