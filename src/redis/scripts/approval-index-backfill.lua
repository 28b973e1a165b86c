-- Puts one approval made before the per-workspace indexes into its workspace's, as the record
-- stands now: read and written in one step, so a decision or a prune that lands meanwhile never
-- leaves it listed where it no longer belongs (or listed at all once gone).
-- KEYS: the approval, the service-wide index of all, the workspace's pending, decided, all and
-- by-expiry indexes. ARGV: id. Returns 1 when indexed, 0 when the record is gone.
local f = redis.call('HMGET', KEYS[1], 'state', 'createdAt', 'decidedAt', 'expiresAt')
if not f[1] then return 0 end
if f[1] == 'pending' then
  redis.call('ZADD', KEYS[3], f[2], ARGV[1])
  redis.call('ZADD', KEYS[6], f[4], ARGV[1])
else
  redis.call('ZADD', KEYS[4], f[3] or f[2], ARGV[1])
end
-- Past retention a pending approval leaves the index of all but stays pending (see pruneRedis):
-- the workspace's mirrors the service's.
if redis.call('ZSCORE', KEYS[2], ARGV[1]) then redis.call('ZADD', KEYS[5], f[2], ARGV[1]) end
return 1
