-- The original RMQ design, two-phase pop: RMQ.POP as one Lua script (EVALSHA).
--   KEYS[1] = Q, KEYS[2] = prepare{Q}, KEYS[3] = meta{Q}
--   ARGV[1] = count (1..10000), ARGV[2] = lease ms
-- Reply: nil, or an array of [message, deliveries].
-- Same rules and the same meta{Q} layout as RMQ: `w<m>` = deliveries already made of a
-- waiting copy (kept only when > 0), `f<m>` = the in-flight delivery, "deliveries:priority"
-- for a priority queue (the priority is restored on rollback), "deliveries" for the timed
-- kinds only when > 1. A waiting copy whose content is in flight is skipped (at most one
-- delivery of a content in flight).
local count = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
if not count or count < 1 or count > 10000 then return redis.error_reply('ERR COUNT must be 1..10000') end
if not lease or lease < 1 then return redis.error_reply('ERR LEASE must be > 0') end
local kind = redis.call('HGET', KEYS[3], 'kind')
if not kind then return false end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + lease
local picked, scores = {}, {}
local offset = 0
while #picked < count do
  local want = count - #picked
  local batch
  if kind == 'priority' then
    batch = redis.call('ZREVRANGE', KEYS[1], offset, offset + want - 1, 'WITHSCORES')
  else
    batch = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', offset, want)
  end
  if #batch == 0 then break end
  for i = 1, #batch, 2 do
    if not redis.call('ZSCORE', KEYS[2], batch[i]) then
      picked[#picked + 1] = batch[i]
      scores[#picked] = batch[i + 1]
    end
  end
  offset = offset + #batch / 2
end
if #picked == 0 then return false end
redis.call('ZREM', KEYS[1], unpack(picked))
local adds, fields, out = {}, {}, {}
for i, m in ipairs(picked) do
  local wf = 'w' .. m
  local d = 1
  local w = redis.call('HGET', KEYS[3], wf)
  if w then
    d = tonumber(w) + 1
    redis.call('HDEL', KEYS[3], wf)
  end
  adds[#adds + 1] = deadline
  adds[#adds + 1] = m
  if kind == 'priority' then
    fields[#fields + 1] = 'f' .. m
    fields[#fields + 1] = d .. ':' .. scores[i]
  elseif d > 1 then
    fields[#fields + 1] = 'f' .. m
    fields[#fields + 1] = tostring(d)
  end
  out[i] = {m, d}
end
redis.call('ZADD', KEYS[2], unpack(adds))
if #fields > 0 then redis.call('HSET', KEYS[3], unpack(fields)) end
return out
