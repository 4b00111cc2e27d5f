-- acquire_queued (Store.AcquireQueued). ARGV[4..8]: owner, ttl-ms, floor,
-- patience-ms, busy ('1' when the caller expects K held: the free K's fast
-- path, an EXISTS that would find K, is skipped; a free K is then granted
-- flagged contended). A caller refused joins K's line (or keeps its place)
-- for patience; a lease handed to it meanwhile is returned as granted. The
-- first waiter keeps its place when the grant is refused as recovering.
-- A line with a place not in baton's shape is refused as corrupt where the
-- script reads the line: a join of a held K does not (see below).
local owner, ttl, floor, patience = ARGV[4], ARGV[5], ARGV[6], ARGV[7]

if ARGV[8] ~= '1' then
  local reply = grantFree(owner, ttl, floor)
  if reply then return reply end
end
local slow = lib().joins()
local l = slow.classify()
if l then
  if l[1] ~= 'held' then return l end
  if l[2] == owner and l[5] ~= ' released' then
    redis.call('DEL', M) -- the owner has its lease: the mailbox is read
    return {'ok', l[2], l[3], l[4]}
  end
  if tonumber(patience) > 0 then
    -- A join of a held K reads no place: the reply names the holder and
    -- nobody first in line, and the lapsed places in front are left to
    -- the release, which pops them, and to the calls that read the line.
    slow.join(owner, patience, ttl, floor)
    if l[5] == '' then redis.call('APPEND', K, ' contended') end
    return {l[1], l[2], l[3], l[4]}
  end
end
local nxt, bad = slow.lines().first()
if not nxt then return bad end
if l then return {l[1], l[2], l[3], l[4], nxt} end
if nxt ~= '' and nxt ~= owner then
  slow.join(owner, patience, ttl, floor)
  return {'queued', nxt}
end
local tok, refused = grant(owner, ttl, floor, ' contended', nil, (slow.now()))
if tok and nxt == owner then slow.leave(owner) end
return tok or refused
