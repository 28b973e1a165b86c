-- Each active job of a BullMQ queue with its lock's value ('' for none), flattened: id, lock, id, lock, …
-- KEYS[1]: the queue's active list. ARGV[1]: the queue's key prefix (`<bull prefix>:<queue>:`).
local active = redis.call('LRANGE', KEYS[1], 0, -1)
local out = {}
for _, id in ipairs(active) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('GET', ARGV[1] .. id .. ':lock') or ''
end
return out
