package synclock

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"

	"github.com/baton-go/baton/backend"
)

// callerKey returns the symbol name of the function skip frames above its
// caller ("github.com/acme/billing/invoice.(*Service).Close"): the same in
// every build of the same source, on every instance.
func callerKey(skip int) (string, bool) {
	var pcs [1]uintptr
	if runtime.Callers(skip+2, pcs[:]) < 1 {
		return "", false
	}
	frame, _ := runtime.CallersFrames(pcs[:]).Next()
	return keySafe(frame.Function), frame.Function != ""
}

// keySafe keeps spaces and braces (hash tags) out of a key; symbol names
// have neither, but guard anyway.
func keySafe(name string) string {
	return strings.NewReplacer(" ", "_", "{", "(", "}", ")").Replace(name)
}

// doKey names the lock of a Do of fn called skip frames above doKey's
// caller (see Do). Only a caller the runtime cannot name fails.
func doKey(fn func(context.Context) error, skip int) (string, error) {
	if name, ok := funcName(fn); ok {
		return name, nil
	}
	key, ok := callerKey(skip + 1)
	if !ok {
		return "", fmt.Errorf("synclock: %w: cannot name the function that calls Do; name the lock with Locker.DoKey(ctx, \"<constant key>\", fn)", backend.ErrInvalidArgument)
	}
	named, _ := compilerNamed(key)
	return named, nil
}

// funcName returns the name of fn when it is a named function or a method
// value, and false for a closure, a function made by reflect, or nil.
func funcName(fn func(context.Context) error) (string, bool) {
	f := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()) // nil for a nil fn
	if f == nil {
		return "", false
	}
	// A method value's function is the method's name plus "-fm".
	name := strings.TrimSuffix(f.Name(), "-fm")
	if name == "" || strings.HasPrefix(name, "reflect.") {
		return "", false
	}
	if _, numbered := compilerNamed(name); numbered {
		return "", false
	}
	return keySafe(name), true
}

// compilerNamed reports whether a symbol name was numbered by the
// compiler, so changes with the source above it: a closure ("F.func1",
// "F.func1.2"), a go or defer wrapper ("F.gowrap1"), a range-over-func
// body ("F-range1"), a package-level closure ("glob..func1"). It returns
// the named function around it, or name itself.
func compilerNamed(name string) (string, bool) {
	pkgEnd := strings.LastIndexByte(name, '/') + 1
	if i := strings.IndexByte(name[pkgEnd:], '.'); i >= 0 {
		pkgEnd += i + 1
	} else {
		return name, false
	}
	// "[...]" stands for a generic function's type arguments; hide its
	// dots while splitting.
	const generic = "\x00"
	parts := strings.Split(strings.ReplaceAll(name[pkgEnd:], "[...]", generic), ".")
	for i, p := range parts {
		base, _, ranged := strings.Cut(p, "-range")
		// The first element is a named function or type: a package-level
		// function may well be called func1.
		if !ranged && (i == 0 || p != "" && !numbered(p)) {
			continue
		}
		kept := parts[:i:i]
		if ranged && base != "" {
			kept = append(kept, base)
		}
		named := name[:pkgEnd] + strings.ReplaceAll(strings.Join(kept, "."), generic, "[...]")
		return strings.TrimSuffix(named, "."), true
	}
	return name, false
}

// numbered reports whether p is "func3", "gowrap1", "deferwrap2" or a
// bare number (a closure within a closure).
func numbered(p string) bool {
	for _, prefix := range []string{"func", "gowrap", "deferwrap", ""} {
		if rest, ok := strings.CutPrefix(p, prefix); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			return true
		}
	}
	return false
}
