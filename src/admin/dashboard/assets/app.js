// weir's dashboard: asks for a token (kept in this tab's sessionStorage),
// then reads /admin/dashboard/{state,series,usage} with it as a bearer
// header every few seconds. Everything is built with textContent: names
// from the config or from keys are never parsed as HTML.
"use strict";

(function () {
  const KEY = "weir-dashboard-token";
  const $ = (id) => document.getElementById(id);
  const charts = {};
  let timer = null;
  let interval = 5000;

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }

  function num(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return "–";
    const d = digits === undefined ? (Math.abs(v) < 10 && v % 1 !== 0 ? 2 : 0) : digits;
    return Number(v).toLocaleString("en", { maximumFractionDigits: d, minimumFractionDigits: 0 });
  }

  function duration(s) {
    if (s === null || s === undefined) return "–";
    if (s < 1) return num(s * 1000, 0) + " ms";
    if (s < 120) return num(s, 0) + " s";
    if (s < 7200) return num(s / 60, 0) + " min";
    if (s < 172800) return num(s / 3600, 1) + " h";
    return num(s / 86400, 1) + " d";
  }

  function pairs(obj) {
    const keys = Object.keys(obj || {}).filter((k) => obj[k]);
    return keys.length ? keys.map((k) => k + " " + num(obj[k])).join(", ") : "–";
  }

  // A table from a header row and rows of cells (a cell is a value, or
  // [value, class]).
  function table(id, head, rows, empty) {
    const t = $(id);
    t.replaceChildren();
    const thead = el("thead");
    const tr = el("tr");
    head.forEach((h) => tr.appendChild(el("th", h)));
    thead.appendChild(tr);
    t.appendChild(thead);
    const body = el("tbody");
    if (!rows.length) {
      const r = el("tr");
      const c = el("td", empty || "none", "meta");
      c.colSpan = head.length;
      r.appendChild(c);
      body.appendChild(r);
    }
    rows.forEach((cells) => {
      const r = el("tr");
      cells.forEach((c, i) => {
        const cell = Array.isArray(c) ? el("td", c[0], c[1]) : el("td", c);
        cell.dataset.label = head[i];
        r.appendChild(cell);
      });
      body.appendChild(r);
    });
    t.appendChild(body);
  }

  function card(parent, label, value, cls) {
    const c = el("div", null, "card" + (cls ? " " + cls : ""));
    c.appendChild(el("span", label, "label"));
    c.appendChild(el("strong", value));
    parent.appendChild(c);
  }

  async function get(path) {
    const token = sessionStorage.getItem(KEY);
    const resp = await fetch(path, {
      headers: { Authorization: "Bearer " + token },
      cache: "no-store",
      credentials: "omit",
    });
    if (resp.status === 401 || resp.status === 403) {
      const e = new Error(resp.status === 401 ? "that token is not accepted" : "that token may not read the dashboard");
      e.auth = true;
      throw e;
    }
    if (resp.status === 404 && path.indexOf("/admin/dashboard/state") === 0) {
      throw new Error("the dashboard is off: configure [admin] token_file or view_token_file");
    }
    const body = await resp.json();
    if (!resp.ok) throw new Error(body.error || ("HTTP " + resp.status));
    return body;
  }

  function showLogin(message) {
    sessionStorage.removeItem(KEY);
    if (timer) clearTimeout(timer);
    $("board").hidden = true;
    $("logout").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("token").focus();
  }

  function renderEdge(s) {
    $("meta").textContent = "v" + s.version + " · up " + duration(s.uptime_seconds) +
      " · config #" + s.generation + (s.draining ? " · DRAINING" : "");
    const cards = $("cards");
    cards.replaceChildren();
    const c = s.connections;
    card(cards, "connections open", num(c.open));
    card(cards, "parked", num(c.parked));
    card(cards, "reclaimed", num(c.reclaimed));
    card(cards, "requests/s", num(s.requests.per_second, 1));
    card(cards, "in flight", num(s.requests.in_flight));
    const shed = Object.values(s.requests.shed || {}).reduce((a, b) => a + b, 0);
    card(cards, "shed", num(shed), shed ? "warn" : "");
    table("listeners", ["listener", "address", "TLS", "open", "accepted"],
      c.listeners.map((l) => [l.name, l.address, l.tls ? "yes" : "no", num(l.open), num(l.accepted)]));
    table("routes", ["route", "kind", "hosts / path", "req/s", "5xx/s", "requests", "statuses", "p50 ms", "p90 ms", "p99 ms", "shed", "upstream errors"],
      s.routes.map((r) => [
        r.name, r.kind, (r.hosts.length ? r.hosts.join(" ") : "*") + " " + r.path,
        num(r.per_second, 1), [num(r.errors_per_second, 1), r.errors_per_second > 0 ? "bad" : ""],
        num(r.requests), pairs(r.statuses),
        num(r.latency_ms.p50, 1), num(r.latency_ms.p90, 1), num(r.latency_ms.p99, 1),
        [pairs(r.shed), Object.keys(r.shed).length ? "warn" : ""], pairs(r.upstream_errors),
      ]));
  }

  function renderGroups(s) {
    const list = $("group-list");
    list.replaceChildren();
    if (!s.groups.length) list.appendChild(el("p", "No upstream groups.", "meta"));
    s.groups.forEach((g, i) => {
      const check = g.health_check
        ? "health check GET " + g.health_check.path + " every " + duration(g.health_check.interval_seconds) +
          " (fall " + g.health_check.fall + ", rise " + g.health_check.rise + ")"
        : "passive health only";
      list.appendChild(el("h3", g.route + " → " + g.group));
      list.appendChild(el("p", check, "meta"));
      const wrap = el("div", null, "scroll");
      const t = el("table");
      t.id = "group-" + i;
      t.className = "members";
      wrap.appendChild(t);
      list.appendChild(wrap);
      table(t.id, ["server", "state", "why", "back in", "in flight", "latency ms", "failures", "picks", "ejections", "weight"],
        g.members.map((m) => [
          m.server, [m.state, m.state === "in" ? "good" : "bad"], m.why || "",
          m.back_in_seconds === null ? (m.state === "out" ? "when it passes" : "") : duration(m.back_in_seconds),
          num(m.in_flight), num(m.latency_ms, 1), num(m.failures), num(m.picks), pairs(m.ejections),
          num(m.weight) + (m.backup ? " (backup)" : ""),
        ]));
    });
    const f = s.fleet;
    table("fleet", ["fleet", "Redis", "instances", "when Redis is away", "decisions"],
      f.configured
        ? [["shared", [f.redis_up ? "up" : "down", f.redis_up ? "good" : "bad"], num(f.instances), f.on_failure, pairs(f.decisions)]]
        : [["this instance alone (no [cluster])", "–", "1", "–", "–"]]);
  }

  function renderLlm(s) {
    const l = s.llm;
    const cards = $("llm-cards");
    cards.replaceChildren();
    card(cards, "LLM requests", num(l.requests));
    card(cards, "spend since start", num(l.spend, 4));
    card(cards, "input tokens", num((l.tokens || {}).input || 0));
    card(cards, "output tokens", num((l.tokens || {}).output || 0));
    card(cards, "failovers", pairs(l.failovers));
    card(cards, "budget refusals", pairs(l.budget_refusals));
    table("budgets", ["route", "client", "window", "used", "limit", "share", "resets in"],
      l.budgets.map((b) => [b.route || "–",
        b.kind === "team" ? "team " + b.team
          : b.kind === "key" ? b.client + " (" + (b.user || b.key) + ")" : b.client, b.bound, num(b.used, 4), num(b.limit, 4),
        [num(b.share * 100, 0) + " %", b.share >= 0.9 ? "bad" : b.share >= 0.7 ? "warn" : ""],
        duration(b.resets_in_seconds)]), "no bounded budgets");
    $("certificates").dataset.count = s.certificates.length;
    table("certificates", ["names", "source", "listener", "expires in", "expires", "renewal"],
      s.certificates.map((c) => [c.names.join(" "), c.source, c.listener || "", 
        [c.expires_in_days === null ? "–" : num(c.expires_in_days) + " d", c.expires_in_days !== null && c.expires_in_days < 14 ? "bad" : ""],
        c.not_after_unix ? new Date(c.not_after_unix * 1000).toISOString().slice(0, 10) : "–",
        c.renewal + (c.failed_orders ? " (" + c.failed_orders + " failed orders)" : "")]));
  }

  async function renderUsage() {
    const by = $("usage-by").value;
    let u;
    try {
      u = await get("/admin/dashboard/usage?group_by=" + encodeURIComponent(by));
    } catch (e) {
      if (e.auth) throw e;
      $("usage-source").textContent = e.message;
      table("usage", [by], [], e.message);
      return;
    }
    $("usage-source").textContent = u.source === "process"
      ? "since this process started (no [database])"
      : "last 30 days, from the database";
    table("usage", [by, "requests", "input tokens", "output tokens", "cache read", "cache write", "spend"],
      (u.usage || []).map((r) => [r[by] === null || r[by] === undefined ? "–" : r[by], num(r.requests),
        num(r.input_tokens), num(r.output_tokens), num(r.cache_read_tokens), num(r.cache_write_tokens), num(r.spend, 4)]));
  }

  const PALETTE = ["#2a7ab0", "#d1495b", "#edae49", "#66a182", "#8e6c8a", "#00798c", "#e07a5f", "#3d405b", "#81b29a", "#f2cc8f", "#6d597a", "#b56576", "#999"];

  // An axis label: small amounts (spend per interval) keep their digits.
  function tick(v) {
    if (v === 0) return "0";
    const a = Math.abs(v);
    if (a < 1) return Number(v.toPrecision(2)).toString();
    if (a >= 10000) return num(v / 1000, 0) + "k";
    return num(v, 1);
  }

  function drawChart(name, at, series) {
    const host = $("chart-" + name);
    const names = Object.keys(series);
    host.dataset.points = at.length;
    host.dataset.series = names.join(",");
    host.dataset.total = names.reduce((a, n) => a + series[n].reduce((x, y) => x + y, 0), 0);
    const data = [at].concat(names.map((n) => series[n]));
    const width = Math.max(240, host.clientWidth || 300);
    const key = names.join("\u0000");
    const old = charts[name];
    if (old && old.key === key) {
      old.plot.setData(data);
      if (Math.abs(old.plot.width - width) > 2) old.plot.setSize({ width: width, height: 180 });
      return;
    }
    if (old) old.plot.destroy();
    host.replaceChildren();
    if (typeof uPlot === "undefined") return;
    const opts = {
      width: width,
      height: 180,
      legend: { show: names.length > 0 },
      series: [{}].concat(names.map((n, i) => ({ label: n, stroke: PALETTE[i % PALETTE.length], width: 1.5, points: { show: false } }))),
      axes: [{}, { size: 60, values: (u, splits) => splits.map(tick) }],
      scales: { x: { time: true } },
    };
    charts[name] = { key: key, plot: new uPlot(opts, data, host) };
  }

  async function refresh() {
    if (timer) clearTimeout(timer);
    try {
      const [s, series] = await Promise.all([get("/admin/dashboard/state"), get("/admin/dashboard/series")]);
      interval = Math.max(1000, (series.interval_seconds || 5) * 1000);
      $("problem").hidden = true;
      renderEdge(s);
      renderGroups(s);
      renderLlm(s);
      ["requests", "errors", "shed", "spend", "tokens"].forEach((c) => drawChart(c, series.at, series.charts[c] || {}));
      await renderUsage();
      document.body.dataset.refreshed = String(Date.now());
      document.body.dataset.generation = String(s.generation);
    } catch (e) {
      if (e.auth) {
        showLogin(e.message);
        return;
      }
      $("problem").hidden = false;
      $("problem").textContent = "Could not refresh: " + e.message;
    }
    timer = setTimeout(refresh, interval);
  }

  function start() {
    $("login").hidden = true;
    $("board").hidden = false;
    $("logout").hidden = false;
    refresh();
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("login").addEventListener("submit", (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(KEY, $("token").value.trim());
      $("token").value = "";
      start();
    });
    $("logout").addEventListener("click", () => showLogin(""));
    $("usage-by").addEventListener("change", () => { renderUsage().catch(() => {}); });
    window.addEventListener("resize", () => {
      Object.keys(charts).forEach((n) => {
        const host = $("chart-" + n);
        charts[n].plot.setSize({ width: Math.max(240, host.clientWidth), height: 180 });
      });
    });
    if (sessionStorage.getItem(KEY)) start();
    else showLogin("");
  });
})();
