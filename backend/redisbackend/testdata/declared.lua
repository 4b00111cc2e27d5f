-- A test shim in front of the store's scripts: a script that touches a key
-- it did not declare in KEYS fails with an error naming the key, as
-- servers that enforce Redis's scripting rules (Dragonfly) refuse it.
local declared = {}
for _, k in ipairs(KEYS) do declared[k] = true end
local server = redis
local keyless = {TIME = true, INFO = true, PUBLISH = true, SPUBLISH = true}
local allKeys = {DEL = true, EXISTS = true}
local function check(cmd, ...)
  local c = string.upper(cmd)
  if keyless[c] then return end
  local args = {...}
  local n = 1
  if allKeys[c] then n = #args end
  for i = 1, n do
    if not declared[args[i]] then
      error('undeclared key: ' .. c .. ' ' .. tostring(args[i]) .. ' is not in KEYS')
    end
  end
end
local redis = setmetatable({
  call = function(cmd, ...) check(cmd, ...) return server.call(cmd, ...) end,
  pcall = function(cmd, ...) check(cmd, ...) return server.pcall(cmd, ...) end,
}, {__index = server})
