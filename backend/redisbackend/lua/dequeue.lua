-- dequeue (Store.Dequeue). ARGV[4]: owner. The owner leaves K's line. A
-- K already handed to it is released; if it was first for the free K,
-- K goes to the next waiter: handed over, or "released - <next>" is
-- published so that the next waiter claims at once. The line is read
-- (and a place not in baton's shape refused as corrupt) before anything
-- is written.
local owner = ARGV[4]

local slow = lib().joins().lines()
local line, bad = slow.scan(0)
if not line then return bad end
local was = line.head
if was == owner then
  line, bad = slow.scan(line.rank, line.names) -- the next after owner
  if not line then return bad end
end
local left = slow.leave(owner)
local tok, own, flag = read()
if own == owner and flag ~= ' released' then
  slow.pass(tok, line)
elseif left == 1 and was == owner and redis.call('EXISTS', K) == 0 then
  slow.pass('-', line, true)
else
  slow.drop(line.names)
end
return {'free'}
