-- acquire (Store.Acquire). ARGV[4..6]: owner, ttl-ms, floor.
-- A lease granted while a line or a watch marker exists is flagged
-- contended, so that its release is published.
local owner, ttl, floor = ARGV[4], ARGV[5], ARGV[6]

local reply = grantFree(owner, ttl, floor)
if reply then return reply end
local slow = lib()
local l = slow.classify()
if l then return slow.holder(l) end
local tok, refused = grant(owner, ttl, floor, ' contended')
return tok or refused
