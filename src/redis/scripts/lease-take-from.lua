-- Takes the lease from a holder found dead, only if it still holds it.
-- KEYS: the lease. ARGV: our token, ttl in ms, the dead holder's token. Returns 1 when taken.
if redis.call('GET', KEYS[1]) == ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
