-- dequeue (Store.Dequeue). ARGV[4]: owner. The owner leaves K's line. A
-- K already handed to it is released; if it was first for the free K,
-- K goes to the next waiter: handed over, or "released - <next>" is
-- published so that the next waiter claims at once.
local owner = ARGV[4]

local slow = lib()
local was = slow.first()
local left = slow.leave(owner)
local tok, own, flag = read()
if own == owner and flag ~= ' released' then
  redis.call('DEL', K, M)
  slow.pass(tok)
elseif left == 1 and was == owner and redis.call('EXISTS', K) == 0 then
  slow.pass('-')
end
return {'free'}
