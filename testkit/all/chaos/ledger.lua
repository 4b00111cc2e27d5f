-- The ledger's fenced operations.
-- KEYS[1]  the resource's hash: value, token (last accepted write), node
--          (its writer), seen (the largest token any operation presented)
-- KEYS[2]  the log of applied writes
-- ARGV     op, token, node, holding, value, fire, mode, resource
-- op       read: reply the value if token is not below seen, and raise
--          seen to it, so that an older holder's later write is refused;
--          write: apply value if token passes mode, and log it
-- mode     strict: a write needs a token above the last written and not
--          below seen; same-node: also an equal token from the node that
--          wrote it; off: accept everything (the chaos tests' broken build)
-- Returns {1, value} when done, {0, value} when refused as stale.
local op, token, node, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[7]

-- cmp compares decimal strings below 2^63: by length, then as text.
local function cmp(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  if a == b then return 0 end
  return a < b and -1 or 1
end

local cur = redis.call('HMGET', KEYS[1], 'value', 'token', 'node', 'seen')
local value, last, writer, seen = cur[1] or '0', cur[2], cur[3], cur[4]

if mode ~= 'off' and seen and cmp(token, seen) < 0 then return {0, value} end
if op == 'read' then
  if mode ~= 'off' then redis.call('HSET', KEYS[1], 'seen', token) end
  return {1, value}
end
if last and mode ~= 'off' then
  local c = cmp(token, last)
  if c < 0 then return {0, value} end
  if c == 0 and not (mode == 'same-node' and writer == node) then return {0, value} end
end
redis.call('HSET', KEYS[1], 'value', ARGV[5], 'token', token, 'node', node)
if mode ~= 'off' and (not seen or cmp(token, seen) > 0) then redis.call('HSET', KEYS[1], 'seen', token) end
local t = redis.call('TIME')
redis.call('RPUSH', KEYS[2], table.concat({ARGV[8], token, node, ARGV[4], ARGV[5], ARGV[6], t[1] .. string.format('%06d', tonumber(t[2]))}, ' '))
return {1, ARGV[5]}
