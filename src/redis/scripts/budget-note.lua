-- Counts a call's rates (when given), then the entries a workspace keeps in Redis, after
-- dropping those whose time has passed: a call is admitted in one round trip (issue 31).
-- KEYS: the workspace's ledger (a sorted set: `<call key>|<kind>:<bytes>` scored by when it
-- goes, ms) and its sum (a string), then 0 to 2 rate counters (the caller's key's, then its
-- workspace's). ARGV: now, a cap (-1: count only the rates, as for a lookup), then points,
-- limit and window (s) per rate counter, then member, bytes, goes-at per entry.
-- A rate counter is a fixed window, as rate-limiter-flexible kept it: made at the first call
-- with the window's TTL, spent even past its limit; past it, nothing else is counted. An entry
-- already counted only moves its time (the same call sent again while it is under way: one
-- member for both); one whose time has come goes at once (a call's `call` entry when its worker
-- swaps it for its `done` one). With a cap
-- (ARGV[2] > 0), nothing is counted when the workspace already holds it: a call is refused
-- before it is enqueued.
-- Returns {held, when its oldest entry goes (on a refusal by the budget; else ''), verdict, ms
-- left of a refusing counter's window}:
-- verdict 1 counted, 0 refused by the budget, 1 + i refused by the i-th rate counter.
local rates = #KEYS - 2
for r = 1, rates do
  local a = 2 + (r - 1) * 3
  redis.call('SET', KEYS[2 + r], 0, 'EX', ARGV[a + 3], 'NX')
  if redis.call('INCRBY', KEYS[2 + r], ARGV[a + 1]) > tonumber(ARGV[a + 2]) then
    local ttl = redis.call('PTTL', KEYS[2 + r])
    if ttl < 0 then
      redis.call('EXPIRE', KEYS[2 + r], ARGV[a + 3])
      ttl = 1000 * tonumber(ARGV[a + 3])
    end
    return {'', '', 1 + r, ttl}
  end
end
if tonumber(ARGV[2]) < 0 then return {'', '', 1, 0} end
-- The sum as last written by this script, so that it is read (GET) only when nothing here wrote it.
local held
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1000)
if #old > 0 then
  local freed = 0
  for i = 1, #old do freed = freed + tonumber(string.match(old[i], ':(%d+)$')) end
  redis.call('ZREM', KEYS[1], unpack(old))
  held = redis.call('DECRBY', KEYS[2], freed)
end
local cap = tonumber(ARGV[2])
if cap > 0 then
  held = held or tonumber(redis.call('GET', KEYS[2]) or '0')
  if held >= cap then
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return {tostring(held), oldest[2] or '', 0, 0}
  end
end
-- An entry whose time has already come (a call's `call` entry once the worker counts its envelope)
-- goes now: added, it waited for the next call's sweep, which paid for it (ZREM and DECRBY)
-- on that call's way to the queue. What the entries add and free is summed here and written
-- once: a worker's note of a turn's calls held an INCRBY or DECRBY per entry (issue 31).
local now = tonumber(ARGV[1])
local delta = 0
for a = 3 + rates * 3, #ARGV, 3 do
  if tonumber(ARGV[a + 2]) <= now then
    if redis.call('ZREM', KEYS[1], ARGV[a]) == 1 then delta = delta - tonumber(ARGV[a + 1]) end
  elseif redis.call('ZADD', KEYS[1], ARGV[a + 2], ARGV[a]) == 1 then
    delta = delta + tonumber(ARGV[a + 1])
  end
end
if delta ~= 0 then held = redis.call('INCRBY', KEYS[2], delta) end
held = held or tonumber(redis.call('GET', KEYS[2]) or '0')
-- Both keys go with their last entry: a workspace that stops calling leaves nothing behind.
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if #last == 0 then
  redis.call('DEL', KEYS[1], KEYS[2])
  return {'0', '', 1, 0}
end
redis.call('PEXPIREAT', KEYS[1], last[2])
redis.call('PEXPIREAT', KEYS[2], last[2])
return {tostring(held), '', 1, 0}
