-- The first transition out of 'pending' wins, atomically, judged by Redis's own clock so that
-- every host agrees on when an approval expired. A decision at or after the expiry is refused.
-- KEYS: the approval, the pending index, the workspace's pending and decided indexes, its pending
-- index by expiry, the decisions not yet delivered, the revoked deciders. ARGV: state, by, reason,
-- id, via, the decider's id ('' for the worker's expiry and an operator's withdrawal).
if redis.call('EXISTS', KEYS[1]) == 0 then return 'NOT_FOUND' end
-- A member revoked since the decider's re-check of the registry: revoke marks them here before it
-- touches their record, so a decision either lands before the revoke began or is refused.
if ARGV[6] ~= '' and redis.call('ZSCORE', KEYS[7], ARGV[6]) then return 'REVOKED' end
local state = redis.call('HGET', KEYS[1], 'state')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiresAt = tonumber(redis.call('HGET', KEYS[1], 'expiresAt'))
if state == 'expired' then return 'EXPIRED' end
if state ~= 'pending' then return 'CONFLICT' end
if ARGV[1] == 'expired' then
  if now < expiresAt then return 'NOT_YET' end
elseif now >= expiresAt then
  return 'EXPIRED'
end
redis.call('HSET', KEYS[1], 'state', ARGV[1], 'decidedAt', now)
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'decidedBy', ARGV[2]) end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'reason', ARGV[3]) end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'decidedVia', ARGV[5]) end
redis.call('ZREM', KEYS[2], ARGV[4])
redis.call('ZREM', KEYS[3], ARGV[4])
redis.call('ZREM', KEYS[5], ARGV[4])
redis.call('ZADD', KEYS[4], now, ARGV[4])
-- A person's decision is owed its announce and its call's wake-up, which its decider does next;
-- kept here, in the same step, until done (ApprovalService.announce), so a decider that dies in
-- between leaves it for a worker to finish (undelivered-decisions.ts). An expiry is the worker's own.
if ARGV[1] ~= 'expired' then redis.call('ZADD', KEYS[6], now, ARGV[4]) end
return 'OK'
