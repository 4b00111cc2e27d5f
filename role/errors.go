package role

import "errors"

var (
	// ErrNotMaster reports that this instance is not the master.
	ErrNotMaster = errors.New("role: this instance is not the master")

	// ErrRunning reports a second Run or Start of one elector.
	ErrRunning = errors.New("role: elector is already running")

	// ErrNoDefault reports a package-level call before SetDefault.
	ErrNoDefault = errors.New("role: no default elector: call role.SetDefault first")
)
