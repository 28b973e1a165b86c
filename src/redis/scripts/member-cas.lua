-- Writes a member record only if it still holds what the caller read ('' = absent), and moves
-- the key index with it, so a record and its key hash can never disagree. Both keys share the
-- `{members}` hash tag, so this stays one slot on Redis Cluster.
-- KEYS: members(ws), memberKeys. ARGV: name, expected, record, hash to drop, hash to add, its
-- value, the registry-changes channel (a change is announced in the same step, so caches of who
-- a key is drop a revoked key at once) and the change to announce there (workspaceChanged in
-- principal-cache.ts: only this workspace's cached keys go). Returns 1 when written, 0 when the
-- record had changed.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if (cur or '') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if ARGV[4] ~= '' then redis.call('HDEL', KEYS[2], ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[2], ARGV[5], ARGV[6]) end
redis.call('PUBLISH', ARGV[7], ARGV[8])
return 1
