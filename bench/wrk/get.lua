-- wrk -s get.lua URL -- PATHS_FILE
-- GETs the paths of PATHS_FILE (one per line, e.g. /index.html) in turn:
-- the raw file-server baseline for /scrape cache hits.
package.path = debug.getinfo(1, "S").source:match("^@(.*/)") .. "?.lua;" .. package.path
local report = require("report")

local reqs, i = {}, 0

function init(args)
  for _, p in ipairs(report.lines(args[1])) do
    reqs[#reqs + 1] = wrk.format("GET", p)
  end
  i = math.random(#reqs) - 1 -- threads start at different pages
end

function request()
  i = i % #reqs + 1
  return reqs[i]
end

done = report.done
