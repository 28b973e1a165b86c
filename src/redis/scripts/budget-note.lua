-- Counts entries a workspace keeps in Redis, after dropping those whose time has passed.
-- KEYS: the workspace's ledger (a sorted set: `<call key>|<kind>:<bytes>` scored by when it
-- goes, ms) and its sum (a string). ARGV: now, a cap, then member, bytes, goes-at per entry.
-- An entry already counted only moves its time (a call's arguments are counted when enqueued
-- and again, with a nearer time, when it completes). With a cap (ARGV[2] > 0), nothing is
-- counted when the workspace already holds it: a call is refused before it is enqueued.
-- Returns {held, the nearest time or '', 1 when counted or 0 when refused}.
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1000)
if #old > 0 then
  local freed = 0
  for i = 1, #old do freed = freed + tonumber(string.match(old[i], ':(%d+)$')) end
  redis.call('ZREM', KEYS[1], unpack(old))
  redis.call('DECRBY', KEYS[2], freed)
end
local cap = tonumber(ARGV[2])
if cap > 0 and tonumber(redis.call('GET', KEYS[2]) or '0') >= cap then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {redis.call('GET', KEYS[2]) or '0', oldest[2] or '', 0}
end
for a = 3, #ARGV, 3 do
  if redis.call('ZADD', KEYS[1], ARGV[a + 2], ARGV[a]) == 1 then redis.call('INCRBY', KEYS[2], ARGV[a + 1]) end
end
local held = tonumber(redis.call('GET', KEYS[2]) or '0')
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #first == 0 then
  redis.call('DEL', KEYS[1], KEYS[2])
  return {'0', '', 1}
end
-- Both keys go with their last entry: a workspace that stops calling leaves nothing behind.
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
redis.call('PEXPIREAT', KEYS[2], last[2])
return {tostring(held), first[2], 1}
