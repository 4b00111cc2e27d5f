-- inspect (Store.Leases): what is on K and, when it is held, the waiters
-- in its line whose places have not lapsed, first to last, after the
-- holder's fields. It writes nothing: lapsed places are left for the
-- next grant to drop.
local slow = lib()
local r = slow.holder()
if r[1] ~= 'held' then return r end
local ms = math.floor(slow.now() / 1000)
for _, w in ipairs(redis.call('ZRANGE', L, 0, -1)) do
  if slow.live(redis.call('HGET', R, w), ms) then r[#r + 1] = w end
end
return r
