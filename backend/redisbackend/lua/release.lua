-- release (Store.Release). ARGV[4..5]: owner, keep-ms (0: free K now).
-- A plain lease is deleted and nobody is told: nobody waits or watches.
-- A contended one is handed to the first waiter ("renewed <new token>
-- <ttl-ms> <waiter>"), or "released <token> <next>" is published, which
-- wakes watchers; a line with a place not in baton's shape refuses the
-- release as corrupt before anything is written. Keeping K marks it
-- released until keep runs out and publishes "renewed <token> <keep-ms>",
-- so that waiters sleep that long.
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
local line, bad = slow.scan(0)
if not line then return bad end
slow.pass(tok, line)
return tok
