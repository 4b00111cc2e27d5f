-- release (Store.Release, Store.ReleaseAndJoin). ARGV[4..5]: owner,
-- keep-ms (0: free K now); for ReleaseAndJoin ARGV[6..9]: next, ttl-ms,
-- floor, patience-ms: if the release hands K over, next joins the line
-- as a refused acquire_queued would, and the reply is {'joined', token}.
-- A plain lease is deleted and nobody is told: nobody waits or watches.
-- A contended one is handed to the first waiter ("renewed <new token>
-- <ttl-ms> <waiter>"), or "released <token> <next>" is published, which
-- wakes watchers; a line with a place not in baton's shape refuses the
-- release as corrupt, and the release changes nothing (a line emptied by
-- the places it looked at gets the requests' expiry back: see scan).
-- Keeping K marks it released until keep runs out and publishes "renewed
-- <token> <keep-ms>", so that waiters sleep that long.
local owner, keep = ARGV[4], ARGV[5]

local tok, own, flag = read()
if own == owner and flag == '' and keep == '0' then
  redis.call('DEL', K)
  return tok
end
local slow = lib()
if own ~= owner then return slow.holder() end
if tonumber(keep) > 0 then
  if flag ~= ' released' then
    redis.call('SET', K, tok .. ' ' .. own .. ' released', 'PX', keep)
    if flag == ' contended' then
      redis.call('DEL', M)
      redis.call(PUBLISH, K, 'renewed ' .. tok .. ' ' .. keep)
    end
  end
  return tok
end
local line, bad = slow.lines().ending()
if not line then return bad end
-- While K lives its token is the counter's value: a grant writes both in
-- one script, and a break moves the counter past the token only as it
-- ends the lease; a counter dropped under a lease renewed past the
-- counter's life had that value too. The handover's grant takes the
-- token for the counter and reads no F (nor guards: K is there, so the
-- data was not lost).
if slow.pass(tok, line, false, tok) and ARGV[6] then
  slow.joins().join(ARGV[6], ARGV[9], ARGV[7], ARGV[8])
  return {'joined', tok}
end
return tok
