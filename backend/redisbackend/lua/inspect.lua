-- inspect (Store.Leases, LeasesUpTo): what is on K and, when it is held,
-- after the holder's fields, 1 if it left places in line unread (else
-- 0), then the waiters whose places have not lapsed among those it read,
-- first to last. It reads the first ARGV[4] places (-1: all), and one
-- more to tell whether more wait. It writes nothing: lapsed places are
-- left for the next grant to drop.
local slow = lib()
local r = slow.holder()
if r[1] ~= 'held' then return r end
local ms = math.floor(slow.now() / 1000)
local n = tonumber(ARGV[4])
local places = redis.call('ZRANGE', L, 0, n < 0 and -1 or n)
r[5] = 0
if n >= 0 and #places > n then
  r[5] = 1
  places[n + 1] = nil
end
for _, w in ipairs(places) do
  if slow.live(redis.call('HGET', R, w), ms) then r[#r + 1] = w end
end
return r
