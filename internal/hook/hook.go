// Package hook joins callbacks, so that an option that registers one adds
// it to those that earlier options registered instead of replacing them.
package hook

// Join returns a function that calls first, then then. A nil one is left
// out; Join(nil, nil) is nil.
func Join[T any](first, then func(T)) func(T) {
	switch {
	case first == nil:
		return then
	case then == nil:
		return first
	}
	return func(v T) {
		first(v)
		then(v)
	}
}

// Join0 is Join for callbacks without an argument.
func Join0(first, then func()) func() {
	switch {
	case first == nil:
		return then
	case then == nil:
		return first
	}
	return func() {
		first()
		then()
	}
}
