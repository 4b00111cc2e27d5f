-- mark (the watch marker's refresh). ARGV[4]: marker ttl-ms. It sets the
-- watch marker W and flags a plain lease on K contended, so that its
-- release is published.
redis.call('SET', W, '1', 'PX', ARGV[4])
local tok, _, flag = read()
if tok and flag == '' then redis.call('APPEND', K, ' contended') end
return 1
