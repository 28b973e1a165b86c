-- Keeps an approval's agent, tool and database beside its request, for a record made before
-- approval-create.lua kept them there: read once from the request, never again. Only a record
-- that still exists gets them (the upkeep may have pruned it meanwhile: no stray key is made).
-- KEYS: the approval. ARGV: agent, tool, database. Returns 1 when written, 0 when gone.
if redis.call('HEXISTS', KEYS[1], 'request') == 0 then return 0 end
redis.call('HSET', KEYS[1], 'agent', ARGV[1], 'tool', ARGV[2], 'database', ARGV[3])
return 1
