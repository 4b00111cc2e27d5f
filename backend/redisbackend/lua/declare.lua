-- declare writes KEYS[1], a restart guard marker, as an operator's
-- declaration that the server's baton data is whole (Store.DeclareIntact):
-- "0 <run id>", whole since ever, in this run of the server (INFO
-- server's run_id), which a restart changes. It replies with the value.
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
if not run then return redis.error_reply('the server reports no run_id in INFO server') end
redis.call('SET', KEYS[1], '0 ' .. run)
return '0 ' .. run
