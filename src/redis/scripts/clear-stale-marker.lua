-- Removes a shard queue's base marker (BullMQ's wake-up for its blocked worker, member "0")
-- while no job can be taken: none waits, none is prioritized, no delayed one is due. BullMQ
-- leaves one each time a worker takes a job, so the worker's next blocking fetch returns at once
-- and asks for a job that is not there. A job added or promoted later adds its own marker; the
-- delayed jobs' marker (member "1") is left alone.
-- KEYS: marker, wait, prioritized, delayed. Returns 1 when a marker was removed.
if redis.call('LLEN', KEYS[2]) > 0 or redis.call('ZCARD', KEYS[3]) > 0 then return 0 end
local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
if first[2] then
  local t = redis.call('TIME')
  -- BullMQ scores a delayed job by its due time (ms) times 0x1000, plus a counter.
  if tonumber(first[2]) / 0x1000 <= tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) then return 0 end
end
return redis.call('ZREM', KEYS[1], '0')
