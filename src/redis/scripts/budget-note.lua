-- Counts a call's rates (when given), then the entries a workspace keeps in Redis, after
-- dropping those whose time has passed: a call is admitted in one round trip (issue 31). A
-- fragment, the one text of the budget note: it defines `note`, which counts one call, and
-- `writeNotes`, which writes what the notes before it left to write. Run alone (`agentdbBudgetNote`,
-- src/redis/lua-scripts.ts), inside a worker's completions (NOTED_COMPLETE_LUA), and
-- for each call of a batch of admitted adds (src/calls/admitted-add-batch.ts), where what can be
-- summed is written once per workspace and rate counter at the batch's end: a rate counter's
-- count, the ledger's sum and both keys' expiry wait in `counters` and `ledgers` until then.
-- KEYS: the workspace's ledger (a sorted set: `<call key>|<kind>:<bytes>` scored by when it
-- goes, ms) and its sum (a string), then 0 to 2 rate counters (the caller's key's, then its
-- workspace's). ARGV: now, a cap (-1: count only the rates, as for a lookup; 0: none), then
-- points, limit and window (s) per rate counter, then member, bytes, goes-at per entry.
-- A rate counter is a fixed window, as rate-limiter-flexible kept it: made at the first call
-- with the window's TTL, spent even past its limit; past it, nothing else is counted. An entry
-- already counted only moves its time (the same call sent again while it is under way: one
-- member for both); one whose time has come goes at once (a call's `call` entry when its worker
-- swaps it for its `done` one). With a cap (ARGV[2] > 0), nothing is counted when the workspace
-- already holds it: a call is refused before it is enqueued.
-- `note` returns {held, when its oldest entry goes (on a refusal by the budget; else ''),
-- verdict, ms left of a refusing counter's window}: verdict 1 counted, 0 refused by the budget,
-- 1 + i refused by the i-th rate counter; or an error reply (a sum that is not an integer).
-- Redis's clock stands still through a script, so a counter read once cannot expire before
-- `writeNotes`.
local ledgers, order, counters = {}, {}, {}
local function note(KEYS, ARGV)
  local rates = #KEYS - 2
  for r = 1, rates do
    local a = 2 + (r - 1) * 3
    local key = KEYS[2 + r]
    local c = counters[key]
    local count
    if c == nil then
      redis.call('SET', key, 0, 'EX', ARGV[a + 3], 'NX')
      count = redis.call('INCRBY', key, ARGV[a + 1])
      counters[key] = { count = count, pending = 0 }
    else
      c.count = c.count + tonumber(ARGV[a + 1])
      c.pending = c.pending + tonumber(ARGV[a + 1])
      count = c.count
    end
    if count > tonumber(ARGV[a + 2]) then
      local ttl = redis.call('PTTL', key)
      if ttl < 0 then
        redis.call('EXPIRE', key, ARGV[a + 3])
        ttl = 1000 * tonumber(ARGV[a + 3])
      end
      return {'', '', 1 + r, ttl}
    end
  end
  if tonumber(ARGV[2]) < 0 then return {'', '', 1, 0} end
  local w = ledgers[KEYS[1]]
  if w == nil then
    local held = tonumber(redis.call('GET', KEYS[2]) or '0')
    -- A sum INCRBY would refuse fails this call now, before its add, as one call's script
    -- fails there: at the batch's end it would fail every call, their jobs added.
    if held == nil or held % 1 ~= 0 then return redis.error_reply('ERR the budget sum ' .. KEYS[2] .. ' is not an integer') end
    w = { ledger = KEYS[1], sum = KEYS[2], held = held, delta = 0 }
    ledgers[KEYS[1]] = w
    order[#order + 1] = w
  end
  local now = tonumber(ARGV[1])
  if w.sweptAt == nil or now > w.sweptAt or w.more then
    local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 1000)
    w.sweptAt, w.more = now, #old == 1000
    if #old > 0 then
      local freed = 0
      for i = 1, #old do freed = freed + tonumber(string.match(old[i], ':(%d+)$')) end
      redis.call('ZREM', KEYS[1], unpack(old))
      w.held, w.delta, w.changed = w.held - freed, w.delta - freed, true
    end
  end
  local cap = tonumber(ARGV[2])
  if cap > 0 and w.held >= cap then
    local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
    return {tostring(w.held), oldest[2] or '', 0, 0}
  end
  local delta = 0
  for a = 3 + rates * 3, #ARGV, 3 do
    if tonumber(ARGV[a + 2]) <= now then
      if redis.call('ZREM', KEYS[1], ARGV[a]) == 1 then delta = delta - tonumber(ARGV[a + 1]) end
    elseif redis.call('ZADD', KEYS[1], ARGV[a + 2], ARGV[a]) == 1 then
      delta = delta + tonumber(ARGV[a + 1])
    end
  end
  w.held, w.delta, w.changed = w.held + delta, w.delta + delta, true
  return {tostring(w.held), '', 1, 0}
end

-- Writes what the notes so far left to write: each rate counter's count, each workspace's sum,
-- and the expiry of both its keys, which go with their last entry (a workspace that stops calling
-- leaves nothing behind).
local function writeNotes()
  for key, c in pairs(counters) do
    if c.pending ~= 0 then redis.call('INCRBY', key, c.pending) end
  end
  for _, w in ipairs(order) do
    if w.delta ~= 0 then redis.call('INCRBY', w.sum, w.delta) end
    if w.changed then
      local last = redis.call('ZRANGE', w.ledger, -1, -1, 'WITHSCORES')
      if #last == 0 then
        redis.call('DEL', w.ledger, w.sum)
      else
        redis.call('PEXPIREAT', w.ledger, last[2])
        redis.call('PEXPIREAT', w.sum, last[2])
      end
    end
  end
end
