-- Shared by get.lua and scrape.lua: at the end of a run wrk calls done(),
-- which prints one machine-readable line (prefix "WRK_JSON ") beside wrk's
-- own text report. Latencies are in microseconds in wrk; we print ms.
local M = {}

function M.done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    'WRK_JSON {"requests":%d,"seconds":%.3f,"rps":%.1f,' ..
    '"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,"max_ms":%.3f,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d}}\n',
    summary.requests, secs, summary.requests / secs,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000,
    e.connect, e.read, e.write, e.status, e.timeout))
end

-- lines reads a file into a list of non-empty lines.
function M.lines(name)
  local out = {}
  local f = assert(io.open(name, "r"))
  for line in f:lines() do
    if line ~= "" then out[#out + 1] = line end
  end
  f:close()
  assert(#out > 0, "no lines in " .. name)
  return out
end

return M
