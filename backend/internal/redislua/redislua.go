// Package redislua holds the Lua that both Redis stores (redisbackend
// and springredis) send in front of their scripts: the fencing rule and
// the counter's life (fence.lua), written once.
package redislua

import _ "embed"

// Fence is the Lua text of the fencing rule: fenceLimit, fenceRead,
// fenceFloor and fenceNext (see fence.lua). A script that grants or
// breaks a lease is sent behind it.
//
//go:embed fence.lua
var Fence string
