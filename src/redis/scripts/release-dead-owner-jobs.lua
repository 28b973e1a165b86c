-- Every active job of the queue loses its lock and is marked stalled, and the stalled check's
-- once-per-interval guard goes: the new worker's first stalled check (which BullMQ runs as the
-- worker starts) then moves them back to wait at once. BullMQ's own check counts the move
-- against maxStalledCount as for any stall.
-- KEYS: the queue's active list, stalled set, stalled-check key. ARGV: the queue's key prefix.
-- Returns how many jobs were released.
local active = redis.call('LRANGE', KEYS[1], 0, -1)
for _, id in ipairs(active) do
  redis.call('DEL', ARGV[1] .. id .. ':lock')
  redis.call('SADD', KEYS[2], id)
end
redis.call('DEL', KEYS[3])
return #active
