-- Links a call's MCP task to the call, for one principal (McpTaskLinks.take): only while the link
-- still names what the caller read ('' = none), so two sends of one call at once make one task.
-- KEYS: the link. ARGV: the task id read ('' for none), the new task id, its life (ms).
-- Returns 1 when linked now, else the task id the link names ('' when it has gone meanwhile).
local cur = redis.call('GET', KEYS[1])
if (cur or '') ~= ARGV[1] then return cur or '' end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
