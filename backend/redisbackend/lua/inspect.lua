-- inspect (Store.Leases): what is on K and, when it is held, the waiters
-- in its line whose places have not lapsed, first to last, after the
-- holder's fields: those among the first LOOK places (prelude), so that
-- a huge line costs no more. It writes nothing: lapsed places are left
-- for the next grant to drop. A place not in baton's shape makes it
-- reply corrupt.
local slow = lib()
local r = slow.holder()
if r[1] ~= 'held' then return r end
local ms = math.floor(slow.now() / 1000)
for _, w in ipairs(redis.call('ZRANGE', L, 0, slow.LOOK - 1)) do
  local live, why = slow.place(w, ms)
  if live == nil then return {'corrupt', why} end
  if live then r[#r + 1] = w end
end
return r
