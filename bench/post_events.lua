-- wrk script for the benchmark: POST pre-signed Stripe requests, each exactly once.
--
--   wrk ... -s bench/post_events.lua URL -- PREFIX RECORD_LEN LIMITS COUNT_ANSWERS
--
-- PREFIX.<tid>  file of fixed-length, complete HTTP requests for wrk thread <tid>
--               (written by bench/events.py: wrk cannot compute an HMAC signature)
-- RECORD_LEN    length in bytes of every request in those files
-- LIMITS        "all", or comma-separated per-thread counts: replay only the first N
--               requests of each file (the duplicates pass replays what was sent)
-- COUNT_ANSWERS "1": read every answer in response() and count status codes and the
--               "accepted"/"duplicate" answers; "0": leave response() out, since wrk
--               must then parse headers and body and call Lua for every response
--
-- done() prints one line, "BENCH_RESULT {json}", which bench/wrk.py reads.

local threads = {}
local next_tid = 0

-- Runs in wrk's main Lua state, once per thread, before that thread's init().
function setup(thread)
   thread:set("tid", next_tid)
   next_tid = next_tid + 1
   table.insert(threads, thread)
end

-- Runs in each thread's own Lua state: everything below is per thread.
function init(args)
   local prefix, record_len, limits, count_answers = args[1], args[2], args[3], args[4]
   local file = assert(io.open(prefix .. "." .. tid, "rb"))
   blob = file:read("*a")
   file:close()
   reclen = tonumber(record_len)
   total = math.floor(#blob / reclen)
   limit = total
   if limits ~= "all" then
      local n = 0
      for value in string.gmatch(limits, "[^,]+") do
         if n == tid then limit = math.min(total, tonumber(value)) end
         n = n + 1
      end
   end
   if limit < 1 then limit = 1 end
   -- wrk calls request() once on thread 0 to check the request's syntax and never
   -- sends that one: answer it without consuming an event, so none is skipped.
   verify_pending = (tid == 0)
   idx = 0
   built = 0   -- requests handed to wrk to send
   wraps = 0   -- times this thread ran out of events and started again (must stay 0 for new events)
   accepted = 0
   duplicate = 0
   statuses = {}
   if count_answers ~= "1" then
      response = nil
   end
end

function request()
   if verify_pending then
      verify_pending = false
      return string.sub(blob, 1, reclen)
   end
   idx = idx + 1
   if idx > limit then
      idx = 1
      wraps = wraps + 1
   end
   built = built + 1
   local start = (idx - 1) * reclen + 1
   return string.sub(blob, start, start + reclen - 1)
end

local find = string.find

function response(status, headers, body)
   statuses[status] = (statuses[status] or 0) + 1
   if status == 200 then
      if find(body, '"accepted"', 1, true) then
         accepted = accepted + 1
      elseif find(body, '"duplicate"', 1, true) then
         duplicate = duplicate + 1
      end
   end
end

-- A small JSON encoder: numbers, strings, booleans, arrays and string-keyed objects.
local function encode(value)
   local kind = type(value)
   if kind == "number" then
      if value ~= value or value == math.huge or value == -math.huge then return "null" end
      return string.format("%.17g", value)
   elseif kind == "string" then
      return '"' .. value:gsub('[%c"\\]', function(c)
         return string.format("\\u%04x", string.byte(c))
      end) .. '"'
   elseif kind == "boolean" then
      return tostring(value)
   elseif kind == "table" then
      local parts = {}
      if #value > 0 then
         for _, item in ipairs(value) do table.insert(parts, encode(item)) end
         return "[" .. table.concat(parts, ",") .. "]"
      end
      for key, item in pairs(value) do
         table.insert(parts, encode(tostring(key)) .. ":" .. encode(item))
      end
      return "{" .. table.concat(parts, ",") .. "}"
   end
   return "null"
end

-- Runs in the main Lua state after every thread has stopped.
function done(summary, latency, requests)
   local per_thread = {}
   for _, thread in ipairs(threads) do
      local statuses_by_code = {}
      for code, count in pairs(thread:get("statuses") or {}) do
         statuses_by_code[tostring(code)] = count
      end
      table.insert(per_thread, {
         tid = thread:get("tid"),
         built = thread:get("built"),
         wraps = thread:get("wraps"),
         limit = thread:get("limit"),
         accepted = thread:get("accepted"),
         duplicate = thread:get("duplicate"),
         statuses = statuses_by_code,
      })
   end
   local result = {
      duration_us = summary.duration,
      requests = summary.requests,
      bytes = summary.bytes,
      errors = summary.errors,
      latency_us = {
         p50 = latency:percentile(50),
         p90 = latency:percentile(90),
         p99 = latency:percentile(99),
         p999 = latency:percentile(99.9),
         max = latency.max,
         mean = latency.mean,
      },
      threads = per_thread,
   }
   io.write("BENCH_RESULT " .. encode(result) .. "\n")
end
