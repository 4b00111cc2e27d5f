package role

import "errors"

// ErrNotMaster reports that this instance is not the master.
var ErrNotMaster = errors.New("role: this instance is not the master")

// errRunning reports a second Run of one elector while the first runs.
var errRunning = errors.New("role: elector is already running")
