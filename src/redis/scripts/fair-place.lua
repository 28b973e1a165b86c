-- Where an admitted call's job waits on its shard (session 32, T10): BullMQ takes the wait list
-- (FIFO) before its prioritized set (ordered by priority, then by when added), so a shard whose
-- queue is long orders new jobs by workspace in turn instead of by arrival. Each workspace gets
-- the next tag after its own last one, or after the tag being taken next (the prioritized set's
-- first), whichever is later: a workspace with nothing queued lands in the next round, ahead of
-- the backlog of one that sent 1,000 calls at once, and bursting workspaces interleave one call
-- each per round. The tag is the job's BullMQ priority (its hash's `priority` field), so BullMQ's
-- own moves (a put-back's delay and promotion, a retry, a stalled job's return) keep its place.
-- While the queue is short (fewer than FAIR_FROM jobs waiting) and the workspace has nothing
-- left in the set, the job stays where BullMQ's standard add put it: a lone busy workspace pays
-- an LLEN and a ZCARD. A workspace with jobs still in the set keeps adding there, so its own calls
-- are never taken before its earlier ones. The tags start again from 1 once the set is empty.
-- Defines `fairPlace(waitKey, jobId, workspace, added)`: the standard add's wait key (its key
-- prefix followed by `wait`), the id it answered, and a name of the call's workspace (its ledger
-- key). `added`: the job was added by an earlier command (a caller's own id, a traced call: BullMQ's
-- `queue.add`, session 33), so other adds may have pushed jobs in front of it since; it is taken
-- from wherever it waits on the list (LREM, from the head: it is among the newest), and not at all
-- once a worker took it. Answers true when it moved the job.
local FAIR_FROM = 64
-- BullMQ's highest priority (2^21 - 1): past it tags stay equal, in arrival order.
local TOP_TAG = 2097151
local function fairPlace(waitKey, jobId, workspace, added)
  if type(jobId) ~= 'string' then return end
  local prefix = string.sub(waitKey, 1, -5)
  local prioritized = prefix .. 'prioritized'
  local inSet = redis.call('ZCARD', prioritized)
  local next, last = 0, 0
  local tags = prefix .. 'agentdb-fair'
  if inSet > 0 then
    next = math.floor(tonumber(redis.call('ZRANGE', prioritized, 0, 0, 'WITHSCORES')[2]) / 0x100000000)
    last = tonumber(redis.call('HGET', tags, workspace) or '0')
  end
  if last < next or inSet == 0 then
    if redis.call('LLEN', waitKey) + inSet < FAIR_FROM then return end
  end
  -- Only a job the add has just pushed on the wait list (not one a paused queue holds, nor a
  -- duplicate id's job elsewhere).
  if added then
    if redis.call('LREM', waitKey, 1, jobId) == 0 then return end
  else
    if redis.call('LINDEX', waitKey, 0) ~= jobId then return end
    redis.call('LPOP', waitKey)
  end
  if inSet == 0 then redis.call('DEL', tags) end
  local tag = math.min(math.max(next, last) + 1, TOP_TAG)
  redis.call('HSET', prefix .. jobId, 'priority', tag)
  local count = redis.call('INCR', prefix .. 'pc')
  redis.call('ZADD', prioritized, tag * 0x100000000 + count % 0x100000000, jobId)
  redis.call('HSET', tags, workspace, tag)
  return true
end
