-- Deletes a key only while it holds the value given: the holder lets go of what is still its
-- own, never what another took after it. KEYS: the key. ARGV: the value.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
