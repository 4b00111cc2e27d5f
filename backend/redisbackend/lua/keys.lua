-- The names of a lease script's keys and of the publish command (see
-- prelude.lua), for the script's own text; sent in front of it, after
-- the prelude. The prelude's functions do not use them.
local K, F, L, R, W, M, I, S = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local PUBLISH = ARGV[2]
