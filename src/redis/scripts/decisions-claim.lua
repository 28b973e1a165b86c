-- Claims people's decisions whose decider recorded them at least ARGV[1] ms ago (Redis's clock)
-- and has not delivered them (announced, call woken): each is moved ARGV[2] ms ahead, so no other
-- worker takes it meanwhile, and taken again after that if its claimer died too.
-- KEYS: the undelivered decisions. ARGV: afterMs, holdMs, limit. Returns the approval ids.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]), 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), id)
end
return ids
