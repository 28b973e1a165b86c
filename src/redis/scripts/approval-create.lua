-- Creating is idempotent, so a worker that dies while parking can park again after a retry
-- without moving the deadline or forgetting a decision already made.
-- KEYS: the approval, the pending index, the index of all, the workspace's pending index, its
-- index of all, its pending index by expiry.
-- ARGV: request, workspace, createdAt, expiresAt, id, agent, tool, database. Returns 1 when
-- created, 0 when it existed. Agent, tool and database sit beside the request so the inbox's
-- filters read them without the request (up to ~1 MB of SQL and params).
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'request', ARGV[1], 'state', 'pending', 'workspace', ARGV[2], 'createdAt', ARGV[3], 'expiresAt', ARGV[4], 'agent', ARGV[6], 'tool', ARGV[7], 'database', ARGV[8])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[5])
-- The workspace's own indexes, so its inbox and its list never read another workspace's
-- approvals (H27-3): the last two mirror the service-wide ones, scores and all.
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[5])
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[5])
redis.call('ZADD', KEYS[6], ARGV[4], ARGV[5])
return 1
