-- wrk script for the A2A benchmarks.
--   wrk -s a2a.lua URL -- card            GET the agent card (URL is the card URL)
--   wrk -s a2a.lua URL -- send [LIMIT]    JSON-RPC SendMessage (blocking), a fresh messageId per
--                                         request; with LIMIT each thread stops after LIMIT replies
--                                         and prints "WRKLIMIT"
--   wrk -s a2a.lua URL -- data            the same message with 1,900 JSON values in its metadata
-- Every reply body is checked, so a server that answers 200 with a JSON-RPC error is counted as
-- failing. done() prints one machine-readable line starting with "WRKJSON ".

local threads = {}
local thread_counter = 0

function setup(thread)
  thread_counter = thread_counter + 1
  thread:set("tid", thread_counter)
  table.insert(threads, thread)
end

-- Per-thread state; replies/bad are globals so done() can read them with thread:get().
mode = "card"
limit = 0
sent = 0
replies = 0
bad = 0
prefix = "m"

function init(args)
  mode = args[1] or "card"
  limit = tonumber(args[2] or "0") or 0
  prefix = string.format("m%d-%d", tid or 0, math.random(1, 1000000000))
  if mode == "send" or mode == "data" then
    wrk.method = "POST"
    wrk.headers["Content-Type"] = "application/json"
    wrk.headers["A2A-Version"] = "1.0"
  end
end

local body_format = '{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":'
  .. '{"messageId":"%s-%d","role":"ROLE_USER","parts":[{"text":"hello"}]}}}'

local rows = {}
for i = 1, 1900 do rows[i] = tostring(i) end
local data_format = '{"jsonrpc":"2.0","id":%d,"method":"SendMessage","params":{"message":'
  .. '{"messageId":"%s-%d","role":"ROLE_USER","parts":[{"text":"hello"}],'
  .. '"metadata":{"rows":[' .. table.concat(rows, ",") .. ']}}}}'

function request()
  sent = sent + 1
  if mode == "send" then
    return wrk.format(nil, nil, nil, string.format(body_format, sent, prefix, sent))
  elseif mode == "data" then
    return wrk.format(nil, nil, nil, string.format(data_format, sent, prefix, sent))
  end
  return wrk.format(nil, nil)
end

function response(status, headers, body)
  replies = replies + 1
  if status ~= 200 then
    bad = bad + 1
  elseif mode == "send" or mode == "data" then
    if not string.find(body, "TASK_STATE_COMPLETED", 1, true) then
      bad = bad + 1
    end
  end
  if limit > 0 and replies == limit then
    -- wrk's main thread sleeps for the whole -d; the harness sends SIGINT once every thread
    -- has printed this marker, and wrk then reports as usual.
    io.write("WRKLIMIT\n")
    io.flush()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local replies_total, bad_total = 0, 0
  for _, t in ipairs(threads) do
    replies_total = replies_total + (t:get("replies") or 0)
    bad_total = bad_total + (t:get("bad") or 0)
  end
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"replies":%d,"bad":%d,'
      .. '"socket_errors":%d,"p50_us":%d,"p90_us":%d,"p99_us":%d}\n',
    summary.requests, summary.duration, replies_total, bad_total,
    e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99)))
end
