"""The per-key limiter's two Lua scripts (``limits.RedisLimiter``): the admission (check and
count in one atomic step) and the end of a request (free the slot, settle tokens and spend).
They are called with ``EVALSHA`` by their SHA-1; the source is sent only when Redis answers
``NOSCRIPT``."""

from __future__ import annotations

import hashlib

# KEYS: requests window, tokens window, active count, day spend, total spend.
# ARGV: rpm, tpm, concurrency, window ttl, active ttl, daily cap, total cap, day base, total base.
# A spend counter starts at its base (the request logs' sum) the first time it is seen.
# Returns {0} when admitted, else {1|2|3|4|5, seconds} for rpm / tpm / concurrency / day / total.
ADMIT_LUA = """
local rpm, tpm, conc, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local dcap, tcap = tonumber(ARGV[6]), tonumber(ARGV[7])
if dcap > 0 then
  redis.call('SET', KEYS[4], ARGV[8], 'NX', 'EX', 172800)
  if tonumber(redis.call('GET', KEYS[4])) >= dcap then return {4, 0} end
end
if tcap > 0 then
  redis.call('SET', KEYS[5], ARGV[9], 'NX')
  if tonumber(redis.call('GET', KEYS[5])) >= tcap then return {5, 0} end
end
if tpm > 0 and tonumber(redis.call('GET', KEYS[2]) or '0') >= tpm then return {2, redis.call('TTL', KEYS[2])} end
if conc > 0 and tonumber(redis.call('GET', KEYS[3]) or '0') >= conc then return {3, 1} end
if rpm > 0 then
  if tonumber(redis.call('GET', KEYS[1]) or '0') >= rpm then return {1, redis.call('TTL', KEYS[1])} end
  redis.call('INCR', KEYS[1]); redis.call('EXPIRE', KEYS[1], ttl)
end
if conc > 0 then redis.call('INCR', KEYS[3]); redis.call('EXPIRE', KEYS[3], tonumber(ARGV[5])) end
return {0, 0}
"""
KINDS = {1: "rpm", 2: "tpm", 3: "concurrency", 4: "daily_spend", 5: "total_spend"}


# KEYS: tokens window, active count, day spend, total spend.
# ARGV: 1 to free a concurrency slot (else 0), tokens, window ttl, cost for the day, cost for the total.
# The end of a request in one call: the slot freed (never below 0: a slot whose counter expired
# under a long request) and tokens and spend settled.
FINISH_LUA = """
if ARGV[1] == '1' and redis.call('DECR', KEYS[2]) < 0 then redis.call('DEL', KEYS[2]) end
local tokens, day, total = tonumber(ARGV[2]), tonumber(ARGV[4]), tonumber(ARGV[5])
if tokens > 0 then redis.call('INCRBY', KEYS[1], tokens); redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3])) end
if day > 0 then redis.call('INCRBY', KEYS[3], day) end
if total > 0 then redis.call('INCRBY', KEYS[4], total) end
return 0
"""
ADMIT_SHA = hashlib.sha1(ADMIT_LUA.encode()).hexdigest()
FINISH_SHA = hashlib.sha1(FINISH_LUA.encode()).hexdigest()
