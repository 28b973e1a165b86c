-- budget-note.lua for one call of a batch of admitted adds (src/calls/admitted-add-batch.ts):
-- the same KEYS and ARGV, verdicts and reply, but its writes of a rate counter's count, the
-- ledger's sum and both keys' expiry are left in `counters` and `ledgers` (declared by the batch's
-- script around it) for the batch's end to write once per workspace. A fragment, not a script of
-- its own: it defines `note`. Kept beside budget-note.lua: a change to one is a change to the
-- other (test/integration/admitted-add-batch.test.ts holds them alike).
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
