// Operations dashboard for the crawl server. Vanilla JS, no dependencies.
//
// Data: the WebSocket /monitor/ws pushes {timestamp, health, requests,
// browsers, errors} every 2 s; logs and endpoint statistics are polled every
// 2 s, the timeline every 10 s. Every value element gets its formatted text
// plus the raw payload value in data-value. Everything from the server is
// written with textContent, never as HTML: URLs and error messages come from
// crawled sites.
(function () {
  "use strict";

  var LOG_LIMIT = 50;
  var POLL_MS = 2000;
  var TIMELINE_MS = 10000;
  var TIMELINE_MINUTES = 5;
  var BACKOFF_MIN_MS = 500;
  var BACKOFF_MAX_MS = 30000;
  var COMPLETED_SHOWN = 25;

  var token = new URLSearchParams(location.search).get("token") || "";

  function $(id) { return document.getElementById(id); }

  // ---- formatting ----

  function num(v) { return typeof v === "number" && isFinite(v); }
  function fixed(v, d) { return num(v) ? v.toFixed(d) : "—"; }
  function pct(v) { return num(v) ? v.toFixed(1) + "%" : "—"; }
  function mb(v) {
    if (!num(v)) return "—";
    return v >= 1024 ? (v / 1024).toFixed(2) + " GB" : v.toFixed(1) + " MB";
  }
  function ms(v) {
    if (!num(v)) return "—";
    return v >= 1000 ? (v / 1000).toFixed(2) + " s" : Math.round(v) + " ms";
  }
  function duration(sec) {
    if (!num(sec)) return "—";
    sec = Math.max(0, Math.floor(sec));
    var d = Math.floor(sec / 86400), h = Math.floor(sec % 86400 / 3600),
        m = Math.floor(sec % 3600 / 60), s = sec % 60;
    if (d) return d + "d " + h + "h " + m + "m";
    if (h) return h + "h " + m + "m " + s + "s";
    if (m) return m + "m " + s + "s";
    return s + "s";
  }
  function clock(unix) {
    if (!num(unix)) return "—";
    return new Date(unix * 1000).toLocaleTimeString([], { hour12: false });
  }
  function count(v) { return num(v) ? v.toLocaleString("en-US") : "—"; }

  // setVal writes the formatted text and keeps the raw value in data-value.
  function setVal(id, raw, text) {
    var el = typeof id === "string" ? $(id) : id;
    if (!el) return;
    var dv = raw === undefined || raw === null ? "" : String(raw);
    if (el.getAttribute("data-value") !== dv) el.setAttribute("data-value", dv);
    if (el.textContent !== text) el.textContent = text;
  }

  function setBar(id, percent) {
    var el = $(id);
    if (!el) return;
    var p = num(percent) ? Math.max(0, Math.min(100, percent)) : 0;
    el.style.width = p + "%";
    el.className = "fill" + (p >= 90 ? " bad" : p >= 70 ? " warn" : "");
  }

  function get(obj, path) {
    var parts = path.split(".");
    for (var i = 0; i < parts.length; i++) {
      if (obj === null || typeof obj !== "object") return undefined;
      obj = obj[parts[i]];
    }
    return obj;
  }

  // ---- HTTP ----

  function api(path, method, body) {
    var opts = { method: method || "GET", headers: {}, cache: "no-store" };
    if (token) opts.headers["Authorization"] = "Bearer " + token;
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    return fetch(path, opts).then(function (r) {
      return r.text().then(function (text) {
        var data = null;
        if (text) { try { data = JSON.parse(text); } catch (e) { data = text; } }
        if (!r.ok) {
          var msg = data && typeof data === "object" ? (data.error || data.detail || data.message) : data;
          throw new Error(method + " " + path + ": HTTP " + r.status + (msg ? " — " + msg : ""));
        }
        return data;
      });
    });
  }

  var notices = {};
  function notice(key, msg) {
    if (msg) notices[key] = msg; else delete notices[key];
    var el = $("notice"), all = Object.keys(notices).map(function (k) { return notices[k]; });
    el.hidden = all.length === 0;
    el.textContent = all.join(" · ");
  }

  // ---- keyed table rows ----

  // rows reconciles tbody's <tr>s with items by key, reusing rows so that a
  // button under the pointer survives a re-render. cells(item) returns cell
  // specs {text, cls, value}; actions(item, td) fills the last cell once.
  function rows(tbody, items, key, cells, actions, emptyText, columns) {
    var byKey = {};
    Array.prototype.forEach.call(tbody.querySelectorAll("tr[data-key]"), function (tr) {
      byKey[tr.getAttribute("data-key")] = tr;
    });
    tbody.setAttribute("data-count", String(items.length));
    var empty = tbody.querySelector("tr.empty-row");
    if (items.length === 0) {
      Object.keys(byKey).forEach(function (k) { byKey[k].remove(); });
      if (emptyText && !empty) {
        var tr = document.createElement("tr");
        tr.className = "empty-row";
        var td = document.createElement("td");
        td.colSpan = columns;
        td.className = "empty";
        td.textContent = emptyText;
        tr.appendChild(td);
        tbody.appendChild(tr);
      }
      return;
    }
    if (empty) empty.remove();
    var keep = {};
    items.forEach(function (item, i) {
      var k = String(key(item));
      keep[k] = true;
      var tr = byKey[k];
      var specs = cells(item);
      if (!tr) {
        tr = document.createElement("tr");
        tr.setAttribute("data-key", k);
        specs.forEach(function () { tr.appendChild(document.createElement("td")); });
        if (actions) {
          var atd = document.createElement("td");
          actions(item, atd);
          tr.appendChild(atd);
        }
      }
      specs.forEach(function (s, j) {
        var td = tr.children[j];
        if (td.textContent !== s.text) td.textContent = s.text;
        var cls = s.cls || "";
        if (td.className !== cls) td.className = cls;
        if (s.field) td.setAttribute("data-field", s.field);
        if (s.value !== undefined) td.setAttribute("data-value", String(s.value));
        if (s.title !== undefined) td.title = s.title;
      });
      if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });
    Object.keys(byKey).forEach(function (k) { if (!keep[k]) byKey[k].remove(); });
  }

  // ---- rendering the WebSocket message ----

  function renderHealth(h) {
    var c = (h && h.container) || {}, st = (h && h.stats) || {}, pool = (h && h.pool) || {};
    setVal("cpu-percent", c.cpu_percent, pct(c.cpu_percent));
    setBar("cpu-bar", c.cpu_percent);
    setVal("memory-percent", c.memory_percent, pct(c.memory_percent));
    setBar("memory-bar", c.memory_percent);
    setVal("memory-mb", c.memory_mb, mb(c.memory_mb));
    setVal("memory-limit-mb", c.memory_limit_mb, mb(c.memory_limit_mb));
    setVal("uptime", c.uptime_seconds, duration(c.uptime_seconds));
    setVal("health-status", h && h.status, (h && h.status) || "—");
    setVal("total-requests", st.total_requests, count(st.total_requests));
    setVal("success-rate", st.success_rate_percent, pct(st.success_rate_percent));
    setVal("avg-latency", st.avg_latency_ms, ms(st.avg_latency_ms));
    setVal("active-count", st.active_requests, count(st.active_requests));
    setVal("queued-tasks", st.queued_tasks, count(st.queued_tasks));

    var active = get(pool, "permanent.active");
    setVal("pool-permanent", active, active === undefined ? "—" : active ? "active" : "down");
    $("pool-permanent").className = active ? "ok" : active === false ? "fail" : "";
    var pid = get(pool, "permanent.browser_id");
    $("pool-permanent-id").textContent = pid ? String(pid) : "";
    setVal("pool-hot", get(pool, "hot.count"), count(get(pool, "hot.count")));
    setVal("pool-cold", get(pool, "cold.count"), count(get(pool, "cold.count")));
  }

  function renderBrowsers(b) {
    b = b || {};
    var s = b.summary || {};
    setVal("browsers-total", s.total_count, count(s.total_count) + " browsers");
    setVal("browsers-memory", s.total_memory_mb, mb(s.total_memory_mb));
    setVal("reuse-rate", s.reuse_rate_percent, pct(s.reuse_rate_percent));
    ["permanent", "hot", "cold"].forEach(function (tier) {
      var list = Array.isArray(b[tier]) ? b[tier] : [];
      rows($("browsers-" + tier), list, function (x) { return x.browser_id; }, function (x) {
        return [
          { text: tier, field: "tier" },
          { text: String(x.browser_id), field: "browser_id", value: x.browser_id },
          { text: x.config ? String(x.config) : "default", field: "config", title: x.config ? String(x.config) : "" },
          { text: count(x.request_count), cls: "num", field: "request_count", value: x.request_count },
          { text: mb(x.memory_mb), cls: "num", field: "memory_mb", value: x.memory_mb },
          { text: duration(x.idle_seconds), cls: "num", field: "idle_seconds", value: x.idle_seconds },
          { text: count(x.pages_in_use), cls: "num", field: "pages_in_use", value: x.pages_in_use }
        ];
      }, function (x, td) {
        td.className = "num";
        td.appendChild(actionButton("Restart", "restart", x.browser_id, ""));
        td.appendChild(document.createTextNode(" "));
        td.appendChild(actionButton("Kill", "kill", x.browser_id, "danger"));
      }, "", 8);
    });
    $("browsers").setAttribute("data-count", String(
      ["permanent", "hot", "cold"].reduce(function (n, t) { return n + (Array.isArray(b[t]) ? b[t].length : 0); }, 0)));
  }

  function actionButton(label, action, id, cls) {
    var btn = document.createElement("button");
    btn.type = "button";
    btn.className = "small " + cls;
    btn.textContent = label;
    btn.setAttribute("data-action", action);
    btn.setAttribute("data-browser-id", String(id));
    btn.setAttribute("data-testid", action + "-" + id);
    return btn;
  }

  function renderRequests(r) {
    r = r || {};
    var active = Array.isArray(r.active) ? r.active : [];
    rows($("active-requests"), active, function (x) { return x.id; }, function (x) {
      return [
        { text: String(x.endpoint || ""), field: "endpoint" },
        { text: String(x.url || ""), cls: "url", field: "url", title: String(x.url || "") },
        { text: ms(x.elapsed_ms), cls: "num", field: "elapsed_ms", value: x.elapsed_ms }
      ];
    }, null, "no requests in flight", 3);

    var done = Array.isArray(r.completed) ? r.completed.slice() : [];
    done.sort(function (a, b) { return (b.finished_at || 0) - (a.finished_at || 0); });
    done = done.slice(0, COMPLETED_SHOWN);
    rows($("completed-requests"), done, function (x) { return x.id; }, function (x) {
      var okText = x.success ? "ok" : "failed";
      if (x.status_code) okText += " " + x.status_code;
      return [
        { text: clock(x.finished_at), field: "finished_at", value: x.finished_at },
        { text: String(x.endpoint || ""), field: "endpoint" },
        { text: String(x.url || ""), cls: "url", field: "url", title: String(x.url || "") },
        { text: okText, cls: x.success ? "ok" : "fail", field: "success", value: !!x.success },
        { text: ms(x.latency_ms), cls: "num", field: "latency_ms", value: x.latency_ms },
        { text: String(x.error || ""), cls: "err", field: "error", title: String(x.error || "") }
      ];
    }, null, "no requests yet", 6);
  }

  function renderEndpointStats(stats) {
    var list = [];
    if (stats && typeof stats === "object") {
      Object.keys(stats).sort().forEach(function (k) {
        var v = stats[k] || {};
        list.push({ endpoint: k, count: v.count, avg: v.avg_latency_ms, ok: v.success_rate_percent });
      });
    }
    rows($("endpoint-stats"), list, function (x) { return x.endpoint; }, function (x) {
      return [
        { text: x.endpoint, field: "endpoint" },
        { text: count(x.count), cls: "num", field: "count", value: x.count },
        { text: ms(x.avg), cls: "num", field: "avg_latency_ms", value: x.avg },
        { text: pct(x.ok), cls: "num", field: "success_rate_percent", value: x.ok }
      ];
    }, null, "no traffic yet", 4);
  }

  // ---- logs ----

  function renderLog(ul, items, line, emptyText) {
    var frag = document.createDocumentFragment();
    items.forEach(function (x) {
      var li = document.createElement("li");
      li.setAttribute("data-timestamp", String(x.timestamp));
      var t = document.createElement("time");
      t.textContent = clock(x.timestamp);
      li.appendChild(t);
      line(x, li);
      frag.appendChild(li);
    });
    if (!items.length) {
      var li = document.createElement("li");
      li.className = "empty";
      li.textContent = emptyText;
      frag.appendChild(li);
    }
    ul.replaceChildren(frag);
    ul.setAttribute("data-count", String(items.length));
  }

  function byTimeDesc(a, b) { return (b.timestamp || 0) - (a.timestamp || 0); }

  function renderJanitor(list) {
    list = Array.isArray(list) ? list.slice().sort(byTimeDesc).slice(0, LOG_LIMIT) : [];
    renderLog($("janitor-log"), list, function (x, li) {
      li.appendChild(document.createTextNode(String(x.message || "")));
      if (x.action) li.setAttribute("data-action", String(x.action));
      if (x.browser_id) li.setAttribute("data-browser-id", String(x.browser_id));
    }, "no janitor activity yet");
  }

  // The error log merges the server's log with errors pushed on the socket,
  // which may arrive before the log endpoint has them.
  var errorsFromLog = [], errorsFromWS = [];
  function errorKey(e) { return [e.timestamp, e.task_id || "", e.message || ""].join("\u0000"); }
  function renderErrors() {
    var seen = {}, all = [];
    errorsFromLog.concat(errorsFromWS).forEach(function (e) {
      if (!e || typeof e !== "object") return;
      var k = errorKey(e);
      if (seen[k]) return;
      seen[k] = true;
      all.push(e);
    });
    all.sort(byTimeDesc);
    all = all.slice(0, LOG_LIMIT);
    errorsFromWS = errorsFromWS.filter(function (e) { return e && typeof e === "object"; })
      .sort(byTimeDesc).slice(0, LOG_LIMIT);
    renderLog($("error-log"), all, function (x, li) {
      li.appendChild(document.createTextNode(String(x.message || "")));
      var ctx = [x.endpoint, x.url, x.task_id && "task " + x.task_id].filter(Boolean).join(" · ");
      if (ctx) {
        var s = document.createElement("span");
        s.className = "ctx";
        s.textContent = ctx;
        li.appendChild(s);
      }
    }, "no errors");
  }

  // ---- polling ----

  // poll refreshes the logs and endpoint statistics. Unforced calls (after a
  // socket message, on the timer) are skipped within a second of the last;
  // a forced call (after an action) runs as soon as any fetch in flight ends,
  // so it sees the action's effect.
  var pollInFlight = false, pollAgain = false, lastPoll = 0;
  function poll(force) {
    if (pollInFlight) {
      if (force) pollAgain = true;
      return;
    }
    if (!force && Date.now() - lastPoll < 1000) return;
    pollInFlight = true;
    lastPoll = Date.now();
    Promise.all([
      api("/monitor/logs/janitor?limit=" + LOG_LIMIT).then(renderJanitor),
      api("/monitor/logs/errors?limit=" + LOG_LIMIT).then(function (l) {
        errorsFromLog = Array.isArray(l) ? l : [];
        renderErrors();
      }),
      api("/monitor/endpoints/stats").then(renderEndpointStats)
    ]).then(function () { notice("poll", ""); }, function (e) {
      notice("poll", "logs: " + e.message);
    }).then(function () {
      pollInFlight = false;
      if (pollAgain) { pollAgain = false; poll(true); }
    });
  }

  var timelineInFlight = false;
  function pollTimeline() {
    if (timelineInFlight) return;
    timelineInFlight = true;
    api("/monitor/timeline?minutes=" + TIMELINE_MINUTES).then(function (t) {
      timeline = t && Array.isArray(t.points) ? t.points : [];
      drawTimeline();
      notice("timeline", "");
    }, function (e) {
      notice("timeline", "timeline: " + e.message);
    }).then(function () { timelineInFlight = false; });
  }

  // ---- chart ----

  var timeline = [];
  function cssVar(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }

  function niceMax(v) {
    if (!(v > 0)) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * p >= v) return steps[i] * p;
    return 10 * p;
  }

  function drawTimeline() {
    var cv = $("timeline-chart");
    var dpr = window.devicePixelRatio || 1;
    var w = cv.clientWidth || 900, h = cv.clientHeight || 220;
    if (cv.width !== Math.round(w * dpr) || cv.height !== Math.round(h * dpr)) {
      cv.width = Math.round(w * dpr);
      cv.height = Math.round(h * dpr);
    }
    var g = cv.getContext("2d");
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, w, h);
    var pad = { l: 40, r: 44, t: 10, b: 24 };
    var pw = w - pad.l - pad.r, ph = h - pad.t - pad.b;
    var muted = cssVar("--muted") || "#888", line = cssVar("--line") || "#333";
    g.font = "11px system-ui, sans-serif";
    g.lineWidth = 1;

    var pts = timeline.filter(function (p) { return p && num(p.timestamp); })
      .sort(function (a, b) { return a.timestamp - b.timestamp; });
    cv.setAttribute("data-points", String(pts.length));

    var reqMax = niceMax(pts.reduce(function (m, p) { return Math.max(m, num(p.requests) ? p.requests : 0); }, 0));
    // Grid and axes: percent on the left, requests on the right.
    g.strokeStyle = line;
    g.fillStyle = muted;
    for (var i = 0; i <= 4; i++) {
      var y = pad.t + ph - ph * i / 4;
      g.beginPath(); g.moveTo(pad.l, y + .5); g.lineTo(pad.l + pw, y + .5); g.stroke();
      g.textAlign = "right"; g.textBaseline = "middle";
      g.fillText(i * 25 + "%", pad.l - 6, y);
      g.textAlign = "left";
      var rv = reqMax * i / 4;
      g.fillText(rv % 1 ? rv.toFixed(1) : String(rv), pad.l + pw + 6, y);
    }
    if (pts.length === 0) {
      g.textAlign = "center";
      g.fillText("no data yet", pad.l + pw / 2, pad.t + ph / 2);
      return;
    }
    var t0 = pts[0].timestamp, t1 = pts[pts.length - 1].timestamp;
    if (t1 <= t0) { t0 = t1 - 1; }
    function x(t) { return pad.l + (t - t0) / (t1 - t0) * pw; }
    g.textAlign = "center"; g.textBaseline = "top";
    [t0, (t0 + t1) / 2, t1].forEach(function (t, k) {
      g.textAlign = k === 0 ? "left" : k === 2 ? "right" : "center";
      g.fillText(clock(t), x(t), pad.t + ph + 6);
    });

    function series(field, max, color) {
      g.strokeStyle = color;
      g.lineWidth = 1.5;
      g.beginPath();
      var started = false;
      pts.forEach(function (p) {
        var v = p[field];
        if (!num(v)) { started = false; return; }
        var px = x(p.timestamp), py = pad.t + ph - Math.max(0, Math.min(1, v / max)) * ph;
        if (!started) { g.moveTo(px, py); started = true; } else { g.lineTo(px, py); }
        if (pts.length === 1) g.arc(px, py, 2, 0, 2 * Math.PI);
      });
      g.stroke();
    }
    series("cpu_percent", 100, cssVar("--cpu") || "#58a6ff");
    series("memory_percent", 100, cssVar("--mem") || "#d2a8ff");
    series("requests", reqMax, cssVar("--req") || "#3fb950");
  }

  // ---- WebSocket ----

  var ws = null, attempt = 0, retryTimer = null, retryTick = null;

  function setStatus(state, text) {
    var el = $("ws-status");
    el.setAttribute("data-state", state);
    el.textContent = text;
    $("ws-dot").setAttribute("data-state", state);
  }

  function wsURL() {
    var u = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/monitor/ws";
    return token ? u + "?token=" + encodeURIComponent(token) : u;
  }

  function connect() {
    clearTimeout(retryTimer);
    clearInterval(retryTick);
    $("ws-retry").textContent = "";
    var sock;
    try {
      sock = new WebSocket(wsURL());
    } catch (e) {
      scheduleReconnect();
      return;
    }
    ws = sock;
    sock.onopen = function () {
      if (ws !== sock) return;
      attempt = 0;
      setStatus("connected", "connected");
    };
    sock.onmessage = function (ev) {
      if (ws !== sock) return;
      var msg;
      try { msg = JSON.parse(ev.data); } catch (e) {
        notice("ws", "bad message from /monitor/ws");
        return;
      }
      notice("ws", "");
      render(msg);
      // Logs follow the message, at most one fetch at a time.
      poll();
    };
    sock.onclose = function () {
      if (ws !== sock) return;
      ws = null;
      scheduleReconnect();
    };
    // onerror is always followed by onclose, which reconnects.
  }

  function scheduleReconnect() {
    attempt++;
    var base = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * Math.pow(2, attempt - 1));
    var delay = Math.round(base / 2 + Math.random() * base / 2);
    var due = Date.now() + delay;
    setStatus("reconnecting", "reconnecting");
    function show() {
      $("ws-retry").textContent = "retry " + attempt + " in " + Math.max(0, Math.ceil((due - Date.now()) / 1000)) + "s";
    }
    show();
    retryTick = setInterval(show, 1000);
    retryTimer = setTimeout(connect, delay);
  }

  function render(msg) {
    if (!msg || typeof msg !== "object") return;
    if (num(msg.timestamp)) {
      var el = $("last-update");
      setVal(el, msg.timestamp, clock(msg.timestamp));
      el.setAttribute("datetime", new Date(msg.timestamp * 1000).toISOString());
    }
    if (msg.health) renderHealth(msg.health);
    if (msg.requests) renderRequests(msg.requests);
    if (msg.browsers) renderBrowsers(msg.browsers);
    if (Array.isArray(msg.errors) && msg.errors.length) {
      errorsFromWS = errorsFromWS.concat(msg.errors);
      renderErrors();
    }
  }

  // ---- actions ----

  function withButton(btn, fn) {
    btn.disabled = true;
    return fn().then(function (v) { btn.disabled = false; return v; },
      function (e) { btn.disabled = false; throw e; });
  }

  function showResult(id, text, failed) {
    var el = $(id);
    el.textContent = text;
    el.classList.toggle("failed", !!failed);
  }

  function cleanup() {
    var btn = $("btn-cleanup");
    withButton(btn, function () { return api("/monitor/actions/cleanup", "POST"); }).then(function (r) {
      r = r && typeof r === "object" ? r : {};
      var n = num(r.cleaned_count) ? r.cleaned_count : 0;
      var freed = num(r.memory_freed_mb) ? r.memory_freed_mb : 0;
      var el = $("cleanup-result");
      el.setAttribute("data-cleaned-count", String(n));
      el.setAttribute("data-memory-freed-mb", String(freed));
      el.setAttribute("data-value", String(n));
      showResult("cleanup-result", "Cleanup: " + n + " browser" + (n === 1 ? "" : "s") + " removed, " + mb(freed) + " freed");
      poll(true);
    }, function (e) {
      showResult("cleanup-result", "Cleanup failed: " + e.message, true);
    });
  }

  function resetStats() {
    var btn = $("btn-reset");
    withButton(btn, function () { return api("/monitor/stats/reset", "POST"); }).then(function () {
      showResult("action-result", "Statistics reset");
      poll(true);
    }, function (e) {
      showResult("action-result", "Reset failed: " + e.message, true);
    });
  }

  function browserAction(btn) {
    var action = btn.getAttribute("data-action"), id = btn.getAttribute("data-browser-id");
    var path = action === "kill" ? "/monitor/actions/kill_browser" : "/monitor/actions/restart_browser";
    var verb = action === "kill" ? "Killed" : "Restarted";
    withButton(btn, function () { return api(path, "POST", { browser_id: id }); }).then(function () {
      showResult("action-result", verb + " " + id);
      poll(true);
    }, function (e) {
      showResult("action-result", (action === "kill" ? "Kill " : "Restart ") + id + " failed: " + e.message, true);
    });
  }

  function init() {
    $("btn-cleanup").addEventListener("click", cleanup);
    $("btn-reset").addEventListener("click", resetStats);
    $("browsers").addEventListener("click", function (ev) {
      var btn = ev.target.closest("button[data-action]");
      if (btn && !btn.disabled) browserAction(btn);
    });
    renderJanitor([]);
    renderErrors();
    drawTimeline();
    connect();
    poll(true);
    pollTimeline();
    // Logs also refresh without socket traffic, never more often than 2 s.
    setInterval(function () { if (Date.now() - lastPoll >= POLL_MS - 100) poll(true); }, POLL_MS);
    setInterval(pollTimeline, TIMELINE_MS);
    if (window.ResizeObserver) new ResizeObserver(drawTimeline).observe($("timeline-chart"));
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
