-- wrk script for the sidecar benchmark: GET /check_rate over 10,000 distinct
-- ids (user0 .. user9999), cycled. The requests are formatted once per wrk
-- thread in init, so wrk spends no time building them during the run.
local reqs = {}
local n = 0
local ids = 10000

function init(args)
  local query = args[1] or "scale=60000&limit=1000000"
  for i = 0, ids - 1 do
    reqs[i + 1] = wrk.format("GET", "/check_rate?id=user" .. i .. "&" .. query)
  end
  n = math.random(ids) - 1 -- threads start at different ids
end

function request()
  n = n % ids + 1
  return reqs[n]
end
