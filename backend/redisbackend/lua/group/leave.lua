-- leave (Store.Leave). ARGV: name.
forget(ARGV[1])
redis.call('ZREM', Z, ARGV[1])
return {'ok'}
