// Eddy's dashboard: reads the JobManager's REST API (/v1) and redraws every two seconds.
// Routes: #/ (jobs and TaskManagers) and #/jobs/<id> (one job).
"use strict";

const REFRESH_MS = 2000;
const main = document.getElementById("main");
const banner = document.getElementById("banner");

// ---------------------------------------------------------------- helpers

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function count(n) {
  if (n >= 1e9) return (n / 1e9).toFixed(1) + " G";
  if (n >= 1e6) return (n / 1e6).toFixed(1) + " M";
  if (n >= 1e4) return (n / 1e3).toFixed(1) + " k";
  return Math.round(n).toString();
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}

function percent(ratio) { return Math.round(ratio * 100) + " %"; }
function time(ms) { return ms ? new Date(ms).toLocaleTimeString() : "—"; }
function dateTime(ms) { return ms ? new Date(ms).toLocaleString() : "—"; }
function watermark(ms) {
  return ms === null || ms === undefined ? "—" : new Date(ms).toISOString().replace("T", " ").replace("Z", "");
}
function stateBadge(state) { return el("span", { class: "state " + state }, state); }

// Busy, backpressured and idle as a colour, as Flink's job graph shows them.
function loadColour(metrics) {
  if (metrics.backpressured_ratio > 0.5) return "#f4c7c3";
  if (metrics.backpressured_ratio > 0.1) return "#fbe3c2";
  const busy = Math.min(1, metrics.busy_ratio);
  const light = 97 - Math.round(busy * 30);
  return `hsl(214, 80%, ${light}%)`;
}

// A JobManager with tokens answers 401 without one: the dashboard asks once, keeps the
// token for this tab only (sessionStorage), and sends it as a bearer token.
const TOKEN_KEY = "eddy-token";
let tokenDeclined = false;

function askForToken(message) {
  if (tokenDeclined) return false;
  const token = window.prompt(message + "\nToken (kept for this tab only):");
  if (!token) { tokenDeclined = true; return false; }
  sessionStorage.setItem(TOKEN_KEY, token.trim());
  return true;
}

async function api(method, path, body, retried) {
  const options = { method, headers: {} };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) options.headers["authorization"] = "Bearer " + token;
  if (body !== undefined) {
    options.headers["content-type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  if (response.status === 401 && !retried) {
    sessionStorage.removeItem(TOKEN_KEY);
    if (askForToken("This JobManager needs a token.")) return api(method, path, body, true);
  }
  const text = await response.text();
  const value = text ? JSON.parse(text) : null;
  if (!response.ok) throw new Error(value && value.error ? value.error : response.statusText);
  return value;
}

function showBanner(message) {
  banner.hidden = !message;
  banner.textContent = message || "";
}

// ---------------------------------------------------------------- pages

async function renderJobs() {
  const [jobs, taskmanagers] = await Promise.all([api("GET", "/v1/jobs"), api("GET", "/v1/taskmanagers")]);
  const rows = jobs.map((job) => el("tr", { class: "job" },
    el("td", {}, el("a", { href: "#/jobs/" + job.id }, job.name)),
    el("td", {}, el("code", {}, job.id)),
    el("td", {}, stateBadge(job.state)),
    el("td", { class: "num" }, job.slots),
    el("td", {}, dateTime(job.submitted_at_ms))));
  const tms = taskmanagers.map((tm) => el("tr", { class: "taskmanager" },
    el("td", {}, tm.id),
    el("td", {}, el("code", {}, tm.address)),
    el("td", { class: "num" }, `${tm.slots - tm.free_slots} / ${tm.slots}`),
    el("td", { class: "num" }, tm.last_heartbeat_ms_ago + " ms"),
    el("td", {}, tm.http_address ? el("a", { href: tm.http_address + "/metrics" }, "metrics") : "—")));
  main.replaceChildren(
    el("h2", {}, "Jobs"),
    jobs.length ? el("table", {},
      el("tr", {}, el("th", {}, "Name"), el("th", {}, "Id"), el("th", {}, "State"),
        el("th", { class: "num" }, "Slots"), el("th", {}, "Submitted")),
      rows) : el("p", { class: "muted" }, "No jobs yet: submit one with eddy submit or POST /v1/jobs."),
    el("h2", {}, "TaskManagers"),
    taskmanagers.length ? el("table", {},
      el("tr", {}, el("th", {}, "Id"), el("th", {}, "Address"), el("th", { class: "num" }, "Slots used"),
        el("th", { class: "num" }, "Last heartbeat"), el("th", {}, "Metrics")),
      tms) : el("p", { class: "muted" }, "No TaskManager has registered."));
}

// Columns by depth: a vertex sits one column right of its deepest input.
function layout(job) {
  const depth = new Map();
  for (const vertex of job.vertices) {
    const inputs = job.edges.filter((e) => e.to === vertex.id).map((e) => depth.get(e.from) ?? 0);
    depth.set(vertex.id, inputs.length ? Math.max(...inputs) + 1 : 0);
  }
  const columns = [];
  for (const vertex of job.vertices) {
    const d = depth.get(vertex.id);
    (columns[d] = columns[d] || []).push(vertex);
  }
  return columns;
}

// The changes a vertex emits: its last operator's changelog.
function outputChangelog(vertex) {
  const last = vertex.operators[vertex.operators.length - 1];
  return last ? last.changelog : "";
}

function jobGraph(job) {
  const W = 300, GAP_X = 150, PAD = 16, LINE = 16;
  const height = (v) => 64 + v.operators.length * LINE;
  const columns = layout(job);
  const place = new Map();
  let maxHeight = 0;
  columns.forEach((column, c) => {
    let y = PAD;
    for (const vertex of column) {
      place.set(vertex.id, { x: PAD + c * (W + GAP_X), y, h: height(vertex) });
      y += height(vertex) + 24;
    }
    maxHeight = Math.max(maxHeight, y);
  });
  const width = PAD * 2 + columns.length * W + (columns.length - 1) * GAP_X;
  const edges = job.edges.map((edge) => {
    const a = place.get(edge.from), b = place.get(edge.to);
    const x1 = a.x + W, y1 = a.y + a.h / 2, x2 = b.x, y2 = b.y + b.h / 2;
    const mid = (x1 + x2) / 2;
    return svg("g", { class: "edge" },
      svg("path", { d: `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2 - 6},${y2}`, "marker-end": "url(#arrow)" }),
      svg("text", { x: mid, y: Math.min(y1, y2) - 8, "text-anchor": "middle" },
        edge.partitioning.length > 22 ? edge.partitioning.slice(0, 21) + "…" : edge.partitioning));
  });
  const vertices = job.vertices.map((vertex) => {
    const p = place.get(vertex.id), m = vertex.metrics;
    const ops = vertex.operators.map((op, i) => svg("text", { class: "op", x: p.x + 12, y: p.y + 40 + i * LINE },
      svg("title", {}, `${op.description}  changelog=${op.changelog}`),
      op.description.length > 41 ? op.description.slice(0, 40) + "…" : op.description));
    const statsY = p.y + 40 + vertex.operators.length * LINE + 6;
    return svg("g", { class: "vertex", "data-vertex": vertex.id },
      svg("rect", { class: "box", x: p.x, y: p.y, width: W, height: p.h, rx: 8, fill: loadColour(m) }),
      svg("text", { class: "title", x: p.x + 12, y: p.y + 20 },
        `${vertex.name}  ×${vertex.parallelism}  · ${outputChangelog(vertex)}`),
      ops,
      svg("text", { class: "stats", x: p.x + 12, y: statsY },
        `in ${count(m.records_in_per_second)}/s · out ${count(m.records_out_per_second)}/s · busy ${percent(m.busy_ratio)} · bp ${percent(m.backpressured_ratio)}`));
  });
  const arrow = svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 5, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
    svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#9aa3b5" })));
  return el("div", { class: "panel graph" },
    svg("svg", { width, height: maxHeight, viewBox: `0 0 ${width} ${maxHeight}` }, arrow, edges, vertices),
    el("div", { class: "legend" },
      el("span", {}, el("i", { style: "background:hsl(214,80%,97%)" }), "idle"),
      el("span", {}, el("i", { style: "background:hsl(214,80%,67%)" }), "busy"),
      el("span", {}, el("i", { style: "background:#fbe3c2" }), "backpressured > 10 %"),
      el("span", {}, el("i", { style: "background:#f4c7c3" }), "backpressured > 50 %")));
}

function bar(ratio, colour) {
  return el("div", { class: "bar", title: percent(ratio) },
    el("div", { style: `width:${Math.round(Math.min(1, ratio) * 100)}%;background:${colour}` }));
}

function vertexTable(job) {
  return el("table", {},
    el("tr", {}, el("th", {}, "Vertex"), el("th", { class: "num" }, "Parallelism"),
      el("th", { class: "num" }, "Records in/s"), el("th", { class: "num" }, "Records out/s"),
      el("th", { class: "num" }, "Records out"), el("th", {}, "Busy"), el("th", {}, "Backpressure"),
      el("th", {}, "Watermark (out)"), el("th", { class: "num" }, "State"), el("th", { class: "num" }, "Late")),
    job.vertices.map((v) => {
      const m = v.metrics;
      return el("tr", { class: "vertex-row", "data-vertex": v.id },
        el("td", {}, el("b", {}, v.name), el("div", { class: "muted" }, v.operators.map((o) => o.description).join(" → "))),
        el("td", { class: "num" }, v.parallelism),
        el("td", { class: "num rate-in" }, count(m.records_in_per_second)),
        el("td", { class: "num rate-out" }, count(m.records_out_per_second)),
        el("td", { class: "num" }, count(m.records_out)),
        el("td", {}, bar(m.busy_ratio, "#5b8def"), percent(m.busy_ratio)),
        el("td", { class: "backpressure" }, bar(m.backpressured_ratio, "#e06c5a"), percent(m.backpressured_ratio)),
        el("td", {}, watermark(m.watermark_out_ms)),
        el("td", { class: "num" }, bytes(m.state_bytes)),
        el("td", { class: "num" }, count(m.late_records_dropped)));
    }));
}

function checkpointChart(checkpoints) {
  const shown = checkpoints.filter((c) => c.state !== "in_progress").slice(-40);
  if (!shown.length) return null;
  const W = 640, H = 90, barW = Math.max(4, Math.floor(W / 40) - 3);
  const longest = Math.max(1, ...shown.map((c) => c.duration_ms));
  const bars = shown.map((c, i) => {
    const h = Math.max(2, Math.round((c.duration_ms / longest) * (H - 20)));
    return svg("rect", { class: c.state, x: i * (barW + 3), y: H - h, width: barW, height: h },
      svg("title", {}, `checkpoint ${c.id}: ${c.duration_ms} ms`));
  });
  return el("div", { class: "chart" },
    svg("svg", { width: W, height: H + 4, viewBox: `0 0 ${W} ${H + 4}` },
      svg("text", { x: 0, y: 10 }, `duration, longest ${longest} ms`), bars));
}

function checkpointTable(checkpoints) {
  if (!checkpoints.length) return el("p", { class: "muted" }, "No checkpoint yet (or the job does not checkpoint).");
  return el("table", {},
    el("tr", {}, el("th", { class: "num" }, "Id"), el("th", {}, "State"), el("th", {}, "Triggered"),
      el("th", { class: "num" }, "Duration"), el("th", { class: "num" }, "Written"),
      el("th", { class: "num" }, "Full size"), el("th", { class: "num" }, "Alignment"), el("th", {}, "Failure")),
    checkpoints.slice().reverse().slice(0, 20).map((c) => el("tr", { class: "checkpoint", "data-state": c.state },
      el("td", { class: "num" }, c.id), el("td", {}, stateBadge(c.state)), el("td", {}, time(c.triggered_at_ms)),
      el("td", { class: "num" }, c.duration_ms + " ms"), el("td", { class: "num" }, bytes(c.size_bytes)),
      el("td", { class: "num" }, bytes(c.full_size_bytes)), el("td", { class: "num" }, c.alignment_ms + " ms"),
      el("td", {}, c.failure || ""))));
}

function restartStrategy(job) {
  const reset = job.restart_reset_at_ms ? " · backoff reset " + dateTime(job.restart_reset_at_ms) : "";
  return el("p", { class: "muted restart-strategy" },
    job.restart_strategy + " · " + job.restart_attempts + " counted" + reset);
}

function restartTable(job) {
  if (!job.restart_history.length) {
    return el("div", {}, restartStrategy(job), el("p", { class: "muted" }, "No restarts."));
  }
  return el("div", {}, restartStrategy(job), el("table", {},
    el("tr", {}, el("th", {}, "At"), el("th", {}, "Cause"), el("th", { class: "num" }, "Resumed from")),
    job.restart_history.slice().reverse().map((r) => el("tr", { class: "restart" },
      el("td", {}, dateTime(r.at_ms)), el("td", {}, r.cause),
      el("td", { class: "num" }, r.restored_from ? "checkpoint " + r.restored_from : "—")))));
}

// The result of the last action stays on the page across refreshes.
const actionResult = { job: null, text: "" };

async function act(job, label, method, path, body, describe) {
  const buttons = document.querySelectorAll(".actions button");
  buttons.forEach((b) => { b.disabled = true; });
  actionResult.job = job.id;
  actionResult.text = label + "…";
  refresh();
  try {
    actionResult.text = describe(await api(method, path, body));
  } catch (error) {
    actionResult.text = label + " failed: " + error.message;
  }
  refresh();
}

function actions(job) {
  const running = job.state === "running";
  const base = "/v1/jobs/" + job.id;
  return el("div", { class: "actions" },
    el("button", { id: "savepoint", disabled: running ? null : "", onclick: () =>
      act(job, "Savepoint", "POST", base + "/savepoints", undefined, (r) => "Savepoint: " + r.path) }, "Savepoint"),
    el("button", { id: "stop", disabled: running ? null : "", onclick: () =>
      act(job, "Stop", "POST", base + "/stop", undefined,
        (r) => r.savepoint_path ? "Stopped with savepoint: " + r.savepoint_path : "Stopping (draining)") }, "Stop with savepoint"),
    el("button", { id: "cancel", class: "danger", disabled: ["created", "running", "restarting"].includes(job.state) ? null : "",
      onclick: () => act(job, "Cancel", "DELETE", base, undefined, () => "Cancelled") }, "Cancel"));
}

function facts(job) {
  const sources = job.vertices.filter((v) => !job.edges.some((e) => e.to === v.id));
  const read = sources.reduce((sum, v) => sum + v.metrics.records_out, 0);
  const rate = sources.reduce((sum, v) => sum + v.metrics.records_out_per_second, 0);
  const done = job.checkpoints.filter((c) => c.state === "completed");
  const last = done[done.length - 1];
  const fact = (label, value) => el("div", {}, el("span", {}, label), el("b", {}, value));
  return el("div", { class: "facts" },
    fact("Read", count(read)), fact("Read/s", count(rate)),
    fact("Last checkpoint", last ? `#${last.id} · ${last.duration_ms} ms` : "—"),
    fact("Restarts", job.restarts), fact("Started", dateTime(job.started_at_ms)));
}

async function renderJob(id) {
  const job = await api("GET", "/v1/jobs/" + encodeURIComponent(id));
  document.title = job.name + " · Eddy";
  main.replaceChildren(
    el("p", {}, el("a", { href: "#/" }, "← all jobs")),
    el("div", { class: "panel" },
      el("div", { class: "job-head" }, el("h1", {}, job.name), stateBadge(job.state), el("code", { class: "muted" }, job.id), actions(job)),
      job.reason ? el("p", { class: "reason" }, job.reason) : null,
      actionResult.job === job.id && actionResult.text ? el("div", { id: "savepoint-path", class: "result" }, actionResult.text) : null,
      facts(job)),
    el("h2", {}, "Job graph"), jobGraph(job),
    el("h2", {}, "Vertices"), vertexTable(job),
    el("h2", {}, "Checkpoints"), checkpointChart(job.checkpoints), checkpointTable(job.checkpoints),
    el("h2", {}, "Restarts"), restartTable(job),
    el("h2", {}, "Plan"), el("pre", { class: "plan" }, job.plan));
}

// ---------------------------------------------------------------- refresh loop

let busy = false;

async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const route = location.hash.replace(/^#/, "") || "/";
    const match = route.match(/^\/jobs\/([^/]+)$/);
    if (match) await renderJob(decodeURIComponent(match[1]));
    else { document.title = "Eddy"; await renderJobs(); }
    const [tms, leader] = await Promise.all([api("GET", "/v1/taskmanagers"), api("GET", "/v1/leader")]);
    const slots = tms.reduce((s, t) => s + t.slots, 0), free = tms.reduce((s, t) => s + t.free_slots, 0);
    const leading = leader.high_availability
      ? ` · leader ${leader.holder} (term ${leader.term}, since ${dateTime(leader.since_ms)})`
      : "";
    document.getElementById("cluster").textContent =
      `${tms.length} TaskManagers · ${free} of ${slots} slots free${leading}`;
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
    showBanner("");
  } catch (error) {
    showBanner("Cannot reach the JobManager: " + error.message);
  } finally {
    busy = false;
  }
}

window.addEventListener("hashchange", refresh);
refresh();
setInterval(refresh, REFRESH_MS);
