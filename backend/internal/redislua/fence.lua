-- The fencing rule and the counter's life, written once for both Redis
-- stores (redisbackend and springredis), which send this text in front
-- of every script that grants or breaks a lease.
--
-- A grant at the server's clock t (µs) gets the token
-- max(counter, floor, t) + 1: above every token the counter F gave, above
-- the highest token its client has seen (floor: F may have been lost),
-- and above the clock (F may have been dropped or lost with every
-- client). No token exceeds the fencing limit, t plus backend.MaxTokenLead
-- (366 days, 31622400000000 µs), and none exceeds 2^53 - 1, where Lua
-- numbers are exact. F lives max(ttl, 1 h) after each grant, or forever
-- when a floor put it further ahead of the clock than that: dropped, it
-- could no longer be outrun by the clock.
--
-- A grant checks, as backend.CheckFence does, the floor first (fenceFloor)
-- and then the counter (fenceRead); a refusal writes nothing. These
-- functions name F in what they reply.

-- fenceLimit returns the largest token a grant may make at t (µs).
local function fenceLimit(t)
  return math.min(t + 31622400000000, 9007199254740991)
end

-- fenceRead returns the counter F as a number, or false when it is
-- missing, checked against the limit at t; or nil and the corrupt reply
-- for a counter that is not an integer up to 2^53 - 1 or is beyond the
-- limit (forged, or written while the clock was ahead). c is F as the
-- caller read it (false: missing), or nil to read it here.
local function fenceRead(F, t, c)
  if c == nil then c = redis.pcall('GET', F) end
  if type(c) == 'table' then
    return nil, {'corrupt', 'fencing counter ' .. F .. ' is a ' .. redis.call('TYPE', F).ok .. ', not an integer'}
  end
  if not c then return false end
  local cn = string.match(c, '^%d+$') and tonumber(c)
  if not (cn and cn <= 9007199254740991) then
    return nil, {'corrupt', 'fencing counter ' .. F .. ' holds ' .. string.sub(c, 1, 40) .. ', not a token (an integer up to 2^53-1)'}
  end
  if cn > fenceLimit(t) then
    return nil, {'corrupt', 'fencing counter ' .. F .. ' holds token ' .. c .. ', more than 366 days ahead of the server\'s clock (' ..
      string.format('%d', t) .. ' µs): no grant made it (forged, or written while the clock was ahead); delete it'}
  end
  return cn
end

-- fenceFloor returns the refusal of a floor (a decimal string) at or
-- beyond the limit at t: no grant can have had that token. Nil when the
-- floor is below it.
local function fenceFloor(floor, t)
  local limit = fenceLimit(t)
  if tonumber(floor) < limit then return end
  return {'floor-ahead', 'floor ' .. floor .. ' is not below ' .. string.format('%d', limit) ..
    ', the server\'s clock in µs (' .. string.format('%d', t) .. ') plus 366 days: no grant can have had that token'}
end

-- fenceNext makes the next token of F, max(cn, floor, t) + 1 (cn is
-- fenceRead's number, or false; floor a number), and writes it to F with
-- its life for a lease of ttl ms. It returns the token as a decimal
-- string, or nil and the corrupt reply when F is at 2^53 - 1.
local function fenceNext(F, cn, floor, t, ttl)
  local n = math.max(cn or 0, floor, t) + 1
  if n > 9007199254740991 then
    return nil, {'corrupt', 'fencing counter ' .. F .. ' is at the largest token ' .. string.format('%d', n - 1) ..
      ', and no larger one exists; delete the counter or use another prefix'}
  end
  local tok, life = string.format('%d', n), math.max(tonumber(ttl), 3600000)
  if n - t <= life * 1000 then
    redis.call('SET', F, tok, 'PX', life)
  else
    redis.call('SET', F, tok)
  end
  return tok
end
