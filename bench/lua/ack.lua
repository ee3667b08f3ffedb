-- The original RMQ design, ack: RMQ.ACK as one Lua script (EVALSHA).
--   KEYS[1] = Q, KEYS[2] = prepare{Q}, KEYS[3] = meta{Q}, KEYS[4] = dead{Q}
--   ARGV = messages
-- Reply: how many were in flight. Ends each delivery (ZREM prepare + HDEL its `f<m>`
-- field) and, as RMQ, deletes meta{Q} once the queue is completely empty.
if #ARGV < 1 then return redis.error_reply('ERR wrong number of arguments') end
local n = 0
local fields = {}
for i = 1, #ARGV do
  if redis.call('ZREM', KEYS[2], ARGV[i]) == 1 then
    n = n + 1
    fields[#fields + 1] = 'f' .. ARGV[i]
  end
end
if n > 0 then
  redis.call('HDEL', KEYS[3], unpack(fields))
  if redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[4]) == 0 then redis.call('DEL', KEYS[3]) end
end
return n
