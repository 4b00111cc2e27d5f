-- renew (Store.Renew). ARGV[4..5]: owner, ttl-ms. Renewing a contended
-- lease publishes "renewed <token> <ttl-ms>", so that waiters learn the
-- new expiry without asking.
local owner, ttl = ARGV[4], ARGV[5]

local tok, own, flag = read()
if own == owner and flag ~= ' released' then
  local bad = ahead('key', K, tok, clock())
  if bad then return bad end
  redis.call('PEXPIRE', K, ttl)
  if flag == ' contended' then redis.call(PUBLISH, K, 'renewed ' .. tok .. ' ' .. ttl) end
  return tok
end
return lib().holder()
