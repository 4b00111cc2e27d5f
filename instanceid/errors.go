package instanceid

import "errors"

var (
	// ErrInvalid reports an instance ID, or a part of one, that breaks the
	// rules in the package documentation. The error's text names the part
	// (ip, tenant, app or port) and the offending value.
	ErrInvalid = errors.New("instanceid: invalid instance ID")

	// ErrNoAddress reports that Detect found no usable interface address
	// and was given none. Set Options.IP (config key instance.ip).
	ErrNoAddress = errors.New("instanceid: no usable interface address")
)

// invalidError is an ErrInvalid with a message that names the part and the
// value. in is the whole text being parsed, if parsed is set.
type invalidError struct {
	parsed bool
	in     string
	msg    string
}

func (e *invalidError) Error() string {
	if e.parsed {
		return "instanceid: parse " + quote(e.in) + ": " + e.msg
	}
	return "instanceid: " + e.msg
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *invalidError) Unwrap() error { return ErrInvalid }

func invalid(msg string) error { return &invalidError{msg: msg} }

// inInput attaches the text being parsed to an invalidError.
func inInput(err error, in string) error {
	if e, ok := err.(*invalidError); ok && !e.parsed {
		return &invalidError{parsed: true, in: in, msg: e.msg}
	}
	return err
}
