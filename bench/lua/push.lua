-- The original RMQ design, push: RMQ.PUSH as one Lua script (EVALSHA), same semantics.
--   KEYS[1] = Q (store zset), KEYS[2] = meta{Q} (hash: field `kind`)
--   ARGV[1] = RANGE | PRIORITY | AT | DELAY, ARGV[2] = its integer, ARGV[3..] = messages
-- Reply: how many messages were newly added (not merged).
-- Merge per kind, as RMQ: RANGE = ZADD NX (a waiting copy keeps its due time); PRIORITY,
-- AT, DELAY = plain ZADD (latest score wins). A content that is in flight (prepare{Q}) is
-- added as a new waiting copy; its waiting delivery count starts at 0 (no `w` field).
local mode = string.upper(ARGV[1])
local v = tonumber(ARGV[2])
local kinds = {RANGE = 'range', PRIORITY = 'priority', AT = 'fixed', DELAY = 'fixed'}
local kind = kinds[mode]
if not kind then return redis.error_reply('ERR syntax error') end
local MAX = 9007199254740992
if not v or v ~= math.floor(v)
   or (mode == 'RANGE' and v <= 0) or (mode == 'DELAY' and v < 0)
   or (mode == 'PRIORITY' and (v > MAX or v < -MAX))
   or (mode == 'AT' and (v < 946684800000 or v > MAX)) then
  return redis.error_reply('ERR ' .. mode .. ' value out of range')
end
if #ARGV < 3 then return redis.error_reply('ERR wrong number of arguments') end
local held = redis.call('HGET', KEYS[2], 'kind')
if held and held ~= kind then
  return redis.error_reply('ERR queue holds ' .. held .. ' messages, not ' .. kind .. ' (kind mismatch)')
end
-- Validate the whole batch first: a command that errors changes nothing.
for i = 3, #ARGV do
  local n = #ARGV[i]
  if n == 0 then return redis.error_reply('ERR empty message') end
  if n > 1048576 then return redis.error_reply('ERR message longer than max-message-bytes') end
end
local score = v
if mode == 'RANGE' or mode == 'DELAY' then
  local t = redis.call('TIME')
  score = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + v
end
if not held then redis.call('HSET', KEYS[2], 'kind', kind) end
local args = {}
for i = 3, #ARGV do
  args[#args + 1] = score
  args[#args + 1] = ARGV[i]
end
if mode == 'RANGE' then
  return redis.call('ZADD', KEYS[1], 'NX', unpack(args))
end
return redis.call('ZADD', KEYS[1], unpack(args))
