-- inspect (Store.Leases, LeasesUpTo): what is on K and, when it is held,
-- after the holder's fields, 1 if it left places in line unread (else
-- 0), then the waiters whose places have not lapsed among those it read,
-- first to last. It reads the first ARGV[4] places (-1: all), never more
-- than LOOK (prelude) so that a huge line costs no more, and one more to
-- tell whether more wait. It writes nothing: lapsed places are left for
-- the next grant to drop. A place not in baton's shape makes it reply
-- corrupt.
local slow = lib().lines()
local r = slow.holder()
if r[1] ~= 'held' then return r end
local ms = math.floor(slow.now() / 1000)
local n = tonumber(ARGV[4])
if n < 0 or n > slow.LOOK then n = slow.LOOK end
local places = redis.call('ZRANGE', L, 0, n)
r[5] = 0
if #places > n then
  r[5] = 1
  places[n + 1] = nil
end
for _, w in ipairs(places) do
  local live, why = slow.place(w, ms)
  if live == nil then return {'corrupt', why} end
  if live then r[#r + 1] = w end
end
return r
