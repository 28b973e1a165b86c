-- Finds a call's job by its call key in one round trip (issue 27: a lookup asked every shard's
-- queue in turn, 17 commands for an unknown id, and a workspace polling in a loop slowed others).
-- KEYS: the call id's claim, then the job hash of the call key on each shard queue, shard 0 first.
-- ARGV: shards likely to hold it (its caller's own database's, its workspace's), asked after the
-- shard the claim names (when it parses and names one), then every other shard in order.
-- Returns {shard, the job hash as HGETALL flattens it}, or {-1} when no queue holds the job.
local n = #KEYS - 1
local order = {}
local held = redis.call('GET', KEYS[1])
if held then
  local ok, claim = pcall(cjson.decode, held)
  if ok and type(claim) == 'table' and type(claim.shard) == 'number' then order[#order + 1] = claim.shard end
end
for i = 1, #ARGV do order[#order + 1] = tonumber(ARGV[i]) end
for shard = 0, n - 1 do order[#order + 1] = shard end
local asked = {}
for _, shard in ipairs(order) do
  if shard and shard >= 0 and shard < n and not asked[shard] then
    asked[shard] = true
    local job = redis.call('HGETALL', KEYS[shard + 2])
    if #job > 0 then return {shard, job} end
  end
end
return {-1}
