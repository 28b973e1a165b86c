-- Creating is idempotent, so a worker that dies while parking can park again after a retry
-- without moving the deadline or forgetting a decision already made.
-- KEYS: the approval, the pending index, the index of all.
-- ARGV: request, workspace, createdAt, expiresAt, id. Returns 1 when created, 0 when it existed.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'request', ARGV[1], 'state', 'pending', 'workspace', ARGV[2], 'createdAt', ARGV[3], 'expiresAt', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[5])
return 1
