-- wrk script for the a2a-trio benchmark: builds A2A 1.0 requests and checks every answer.
--
--   wrk -t1 -cN -dDs --timeout 10s -s bench/lua/a2a.lua http://127.0.0.1:PORT -- MODE NONCE
--
-- MODE is one of
--   card     GET /.well-known/agent-card.json; good = 200 and the body has "name"
--   jsonrpc  POST /jsonrpc SendMessage; good = 200 and the task is TASK_STATE_COMPLETED
--   rest     POST /rest/message:send (HTTP+JSON); good as for jsonrpc
--   stream   POST /jsonrpc SendStreamingMessage (SSE); good = 200, exactly 4 "data:"
--            events, the last one TASK_STATE_COMPLETED
-- NONCE makes messageIds unique across wrk runs; within a run each request's
-- messageId is NONCE-THREAD-COUNTER.
--
-- done() prints one line, "BENCH_RESULT {json}", which bench/wrk.py parses:
-- requests, good, bad, duration_s, good_rps (verified responses per second),
-- latency percentiles in ms, wrk's error counters and a sample of a bad response.

local COMPLETED = "TASK_STATE_COMPLETED"
local STREAM_EVENTS = 4

local threads = {}

-- Runs in the main Lua state once per thread, before the thread's init().
function setup(thread)
   thread:set("tid", #threads + 1)
   table.insert(threads, thread)
end

-- Runs in each thread's own Lua state; the globals below are per thread.
function init(args)
   mode = args[1] or "jsonrpc"
   nonce = args[2] or "0"
   counter = 0
   good = 0
   bad = 0
   bad_sample = ""
   json_headers = {
      ["Content-Type"] = "application/json",
      ["A2A-Version"] = "1.0",
   }
   stream_headers = {
      ["Content-Type"] = "application/json",
      ["Accept"] = "text/event-stream",
      ["A2A-Version"] = "1.0",
   }
   -- The card request never changes: format it once.
   card_request = wrk.format("GET", "/.well-known/agent-card.json", { ["A2A-Version"] = "1.0" })
   if mode ~= "card" and mode ~= "jsonrpc" and mode ~= "rest" and mode ~= "stream" then
      error("unknown mode " .. mode)
   end
end

local function message_json()
   local id = nonce .. "-" .. tid .. "-" .. counter
   return '{"messageId":"' .. id .. '","role":"ROLE_USER","parts":[{"text":"hello"}]}'
end

function request()
   counter = counter + 1
   if mode == "card" then
      return card_request
   elseif mode == "rest" then
      return wrk.format("POST", "/rest/message:send", json_headers,
                        '{"message":' .. message_json() .. '}')
   end
   local method = "SendMessage"
   local headers = json_headers
   if mode == "stream" then
      method = "SendStreamingMessage"
      headers = stream_headers
   end
   local body = '{"jsonrpc":"2.0","id":' .. counter .. ',"method":"' .. method
      .. '","params":{"message":' .. message_json() .. '}}'
   return wrk.format("POST", "/jsonrpc", headers, body)
end

-- An SSE body is good when it holds exactly STREAM_EVENTS events (one "data:"
-- line each) and the last of them carries the COMPLETED state.
local function good_stream(body)
   local text = "\n" .. body
   local events, last, position = 0, nil, 1
   while true do
      local found = text:find("\ndata:", position, true)
      if found == nil then break end
      events = events + 1
      last = found
      position = found + 6
   end
   return events == STREAM_EVENTS and text:find(COMPLETED, last, true) ~= nil
end

function response(status, headers, body)
   local ok = false
   if status == 200 then
      if mode == "card" then
         ok = body:find('"name"', 1, true) ~= nil
      elseif mode == "stream" then
         ok = good_stream(body)
      else
         ok = body:find(COMPLETED, 1, true) ~= nil
      end
   end
   if ok then
      good = good + 1
   else
      bad = bad + 1
      if bad_sample == "" then
         bad_sample = status .. " " .. string.sub(body or "", 1, 300)
      end
   end
end

local function json_string(value)
   return (value:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end))
end

function done(summary, latency, requests)
   local total_good, total_bad, sample = 0, 0, ""
   for _, thread in ipairs(threads) do
      total_good = total_good + (thread:get("good") or 0)
      total_bad = total_bad + (thread:get("bad") or 0)
      local thread_sample = thread:get("bad_sample") or ""
      if sample == "" then sample = thread_sample end
   end
   local seconds = summary.duration / 1e6
   local errors = summary.errors
   io.write(string.format(
      'BENCH_RESULT {"requests":%d,"good":%d,"bad":%d,"duration_s":%.6f,'
         .. '"rps":%.3f,"good_rps":%.3f,'
         .. '"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,"mean_ms":%.3f,'
         .. '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},'
         .. '"bad_sample":"%s"}\n',
      summary.requests, total_good, total_bad, seconds,
      summary.requests / seconds, total_good / seconds,
      latency:percentile(50) / 1000, latency:percentile(90) / 1000,
      latency:percentile(99) / 1000, latency.max / 1000, latency.mean / 1000,
      errors.connect, errors.read, errors.write, errors.status, errors.timeout,
      json_string(sample)))
end
