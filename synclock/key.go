package synclock

import (
	"runtime"
	"strings"
)

// callerKey returns the fully qualified name of the function skip frames
// above its caller, such as
// "github.com/acme/billing/invoice.(*Service).Close". The name comes from
// the binary's symbol table, so it is the same in every build of the same
// source and on every instance.
//
// Closures are named after the function that contains them with a
// ".funcN" suffix ("pkg.(*T).M.func1"), numbered in source order; methods
// of generic types and generic functions carry "[...]" in place of their
// type arguments ("pkg.Max[...]"), so every instantiation shares one key.
func callerKey(skip int) (string, bool) {
	var pcs [1]uintptr
	if runtime.Callers(skip+2, pcs[:]) < 1 {
		return "", false
	}
	frame, _ := runtime.CallersFrames(pcs[:]).Next()
	name := frame.Function
	if name == "" {
		return "", false
	}
	// Keys may not hold spaces or braces (hash tags); symbol names have
	// neither, but guard anyway.
	name = strings.NewReplacer(" ", "_", "{", "(", "}", ")").Replace(name)
	return name, true
}
