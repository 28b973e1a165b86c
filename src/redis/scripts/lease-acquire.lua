-- Extend or take the lease only while it is ours (or free): a compare-and-set, so a worker
-- that lost its lease to a takeover can never renew over the new owner.
-- KEYS: the lease. ARGV: our token, ttl in ms.
-- Returns 1 when ours; else the holder's token, so a dead holder on this machine can be told
-- apart at no extra round trip.
local cur = redis.call('GET', KEYS[1])
if cur == false or cur == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return cur
