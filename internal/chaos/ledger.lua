-- The ledger's fenced write.
-- KEYS[1]  the resource's hash: value, token (last accepted), node (its writer)
-- KEYS[2]  the log of applied writes
-- ARGV     token, node, holding, value, fire, mode, resource
-- mode     strict: accept only a token above the last;
--          same-node: also an equal token from the node that wrote it;
--          off: accept everything (the chaos tests' broken build)
-- Returns 1 when applied, 0 when rejected as stale.
local token, node = ARGV[1], ARGV[2]
local mode = ARGV[6]
local last = redis.call('HGET', KEYS[1], 'token')
if last and mode ~= 'off' then
  -- Tokens are decimal strings below 2^63: compare by length, then text.
  local cmp
  if #token ~= #last then
    cmp = #token < #last and -1 or 1
  else
    cmp = token < last and -1 or (token == last and 0 or 1)
  end
  if cmp < 0 then return 0 end
  if cmp == 0 and not (mode == 'same-node' and redis.call('HGET', KEYS[1], 'node') == node) then
    return 0
  end
end
redis.call('HSET', KEYS[1], 'value', ARGV[4], 'token', token, 'node', node)
local t = redis.call('TIME')
redis.call('RPUSH', KEYS[2], table.concat({ARGV[7], token, node, ARGV[3], ARGV[4], ARGV[5], t[1] .. string.format('%06d', tonumber(t[2]))}, ' '))
return 1
