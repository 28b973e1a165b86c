-- Takes a place for a new OAuth client among those nobody has signed in through yet, within the
-- service-wide cap: lapsed places go first, and the count and the add are one step, so
-- registrations at the same moment cannot each find the last place.
-- KEYS: the sorted set of unconsented clients (client id, scored by when its record lapses, ms).
-- ARGV: now (ms), the client id, when its record lapses (ms), the cap.
-- Returns {1, count, ''} when taken, {0, count, the first place's lapse (ms) or ''} when full.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[4]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, count, first[2] or ''}
end
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return {1, count + 1, ''}
