-- wrk -s scrape.lua API_URL -- BODIES_FILE [API_KEY]
-- POSTs /scrape with the JSON bodies of BODIES_FILE (one per line, e.g.
-- {"url":"http://127.0.0.1:P/index.html","format":"md"}) in turn. With the
-- cache warmed by the same bodies, every request is a cache hit. With
-- API_KEY every request also carries "Authorization: Bearer API_KEY" (the
-- gate part sends the same requests to the gate, the cell and a plain
-- Caddy proxy; the latter two ignore it). No response()
-- hook: it makes wrk hand every body to Lua, which on 2 shared cores slows
-- the client more than the server; bench/loadgen warm checks the bodies.
package.path = debug.getinfo(1, "S").source:match("^@(.*/)") .. "?.lua;" .. package.path
local report = require("report")

local reqs, i = {}, 0

function init(args)
  local headers = { ["Content-Type"] = "application/json" }
  if args[2] and args[2] ~= "" then
    headers["Authorization"] = "Bearer " .. args[2]
  end
  for _, body in ipairs(report.lines(args[1])) do
    reqs[#reqs + 1] = wrk.format("POST", "/scrape", headers, body)
  end
  i = math.random(#reqs) - 1
end

function request()
  i = i % #reqs + 1
  return reqs[i]
end

done = report.done
