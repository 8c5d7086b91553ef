// The live view of `tidesched run`: polls /ui/state.json and redraws when a new session is in.
// Plain DOM, no framework, no build step; every text from the cluster goes in as text, never HTML.
"use strict";

const POLL_MS = 2000;
const GENERIC = new Set(["cpu", "memory", "pods"]);
let last = null;       // the latest state document
let lastSession = -1;  // the session it describes
let failures = 0;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "class") e.className = v;
    else if (k === "style") e.setAttribute("style", v);
    else if (k === "text") e.textContent = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

function amount(res, v) {
  if (v === null || v === undefined) return "–";
  if (res === "memory") {
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (Number.isInteger(v) ? v : v.toFixed(1)) + units[i];
  }
  return Number.isInteger(v) ? String(v) : String(Math.round(v * 100) / 100);
}

function ago(t) {
  const s = Math.max(0, Date.now() / 1000 - t);
  if (s < 60) return Math.round(s) + "s ago";
  if (s < 3600) return Math.round(s / 60) + "m ago";
  return Math.round(s / 3600) + "h ago";
}

function clock(t) {
  const d = new Date(t * 1000);
  return d.toTimeString().slice(0, 8);
}

// One bar: used, inqueue and pending stacked, the quota as a red mark.
function bar(u) {
  const quota = u.quota;
  const total = u.used + u.inqueue + u.pending;
  const scale = Math.max(quota || 0, total, 1e-9);
  const pct = (x) => (100 * x / scale).toFixed(2) + "%";
  const b = el("div", { class: "bar" + (quota !== null && u.used > quota ? " over" : "") });
  let at = 0;
  for (const f of ["used", "inqueue", "pending"]) {
    if (u[f] > 0) b.append(el("span", { class: "seg " + f, style: `left:${pct(at)};width:${pct(u[f])}` }));
    at += u[f];
  }
  if (quota !== null) b.append(el("span", { class: "quota", style: `left:calc(${pct(quota)} - 1px)` }));
  return b;
}

function numbers(res, u) {
  const n = el("span", { class: "qnum" });
  n.append(el("b", { text: amount(res, u.used) }), el("span", { class: "dim", text: " / " + (u.quota === null ? "no limit" : amount(res, u.quota)) }));
  if (u.inqueue) n.append(el("span", { class: "dim", text: " · inqueue " + amount(res, u.inqueue) }));
  if (u.pending) n.append(el("span", { class: "dim", text: " · pending " + amount(res, u.pending) }));
  return n;
}

function drawQueues(s) {
  const showGeneric = document.getElementById("show-generic").checked;
  const box = document.getElementById("queues");
  const out = [];
  for (const q of s.queues) {
    const tree = q.depth ? "  ".repeat(q.depth - 1) + "└ " : "";
    const meta = [q.state && q.state !== "Open" ? q.state : null, q.weight !== null ? "weight " + q.weight : null, q.parent ? "in " + q.parent : null]
      .filter(Boolean).join(" · ");
    const block = el("div", { class: "queue", "data-queue": q.name, style: `padding-left:${q.depth * 18}px` },
      el("div", { class: "qname" }, el("span", { class: "tree", text: tree }), q.name, el("span", { class: "qmeta", text: meta })));
    const entries = Object.entries(q.resources);
    const cards = entries.filter(([r]) => !GENERIC.has(r));
    const shown = showGeneric || cards.length === 0 ? entries : cards;
    for (const [res, u] of shown) {
      if (!showGeneric && u.quota === null && !u.used && !u.inqueue && !u.pending) continue;
      block.append(el("div", {
        class: "qrow", "data-queue": q.name, "data-resource": res,
        "data-used": String(u.used), "data-quota": u.quota === null ? "" : String(u.quota),
        "data-inqueue": String(u.inqueue), "data-pending": String(u.pending),
      }, el("span", { class: "qres", text: res, title: res }), bar(u), numbers(res, u)));
    }
    out.push(block);
  }
  box.replaceChildren(...(out.length ? out : [el("div", { class: "empty", text: "no queues" })]));
}

function drawCluster(s) {
  // Per card model: cards in use on the nodes (from the node grid) against what they offer.
  const used = {}, total = {}, nodes = {};
  for (const [, m, u, t] of s.nodes.nodes) {
    const model = s.nodes.models[m];
    used[model] = (used[model] || 0) + u; total[model] = (total[model] || 0) + t; nodes[model] = (nodes[model] || 0) + 1;
  }
  const rows = s.nodes.models.map((model) => el("div", { class: "qrow", "data-model": model },
    el("span", { class: "qres", text: model, title: model }),
    bar({ used: used[model], inqueue: 0, pending: 0, quota: total[model] }),
    el("span", { class: "qnum" }, el("b", { text: amount(model, used[model]) }),
      el("span", { class: "dim", text: ` / ${amount(model, total[model])} ${model === "cpu" ? "cores" : "cards"} · ${nodes[model]} nodes` }))));
  const box = document.getElementById("cluster");
  box.replaceChildren(...(rows.length ? rows : [el("div", { class: "empty", text: "no Ready nodes" })]));
}

function drawNodes(s) {
  const box = document.getElementById("nodes");
  const groups = s.nodes.models.map(() => []);
  for (const row of s.nodes.nodes) groups[row[1]].push(row);
  const small = s.nodes.nodes.length > 400;
  const out = [];
  s.nodes.models.forEach((model, i) => {
    const rows = groups[i];
    let full = 0, idle = 0;
    const grid = el("div", { class: "grid" + (small ? " small" : "") });
    for (const [name, , u, t, flags] of rows) {
      const f = t > 0 ? Math.min(1, u / t) : 0;
      if (t > 0 && u >= t) full++; else if (u <= 0) idle++;
      // idle → light grey, then light to dark blue with the share in use
      const color = f <= 0 ? "var(--idle)" : `hsl(218, ${55 + 15 * f}%, ${78 - 44 * f}%)`;
      grid.append(el("span", { class: "cell" + (flags.includes("c") ? " cordoned" : ""), style: `background:${color}`,
        title: `${name}: ${amount(model, u)} / ${amount(model, t)} ${model === "cpu" ? "cores" : "cards"}${flags.includes("c") ? " (cordoned)" : ""}`,
        "data-node": name }));
    }
    out.push(el("div", { class: "model" },
      el("div", { class: "mhead" }, el("b", { text: model }), ` · ${rows.length} nodes · ${full} full · ${idle} idle · ${rows.length - full - idle} partly used`),
      grid));
  });
  box.replaceChildren(...(out.length ? out : [el("div", { class: "empty", text: "no Ready nodes" })]));
}

function drawPending(s) {
  const needle = document.getElementById("pending-filter").value.trim().toLowerCase();
  const body = document.querySelector("#pending tbody");
  const rows = [];
  for (const p of s.pending) {
    if (needle && !(p.pod + " " + p.queue + " " + p.reasons.join(" ")).toLowerCase().includes(needle)) continue;
    rows.push(el("tr", { "data-pod": p.pod },
      el("td", { text: p.pod }), el("td", { text: p.queue }),
      el("td", {}, el("ul", {}, ...p.reasons.map((r) => el("li", { text: r }))))));
  }
  if (!rows.length) rows.push(el("tr", {}, el("td", { class: "empty", colspan: "3", text: s.pending_total ? "no match" : "nothing pending" })));
  body.replaceChildren(...rows);
  const shown = s.pending.length < s.pending_total ? ` (the first ${s.pending.length} shown)` : "";
  document.getElementById("pending-count").textContent = `${s.pending_total}${shown}`;
}

function drawEvictions(s) {
  const body = document.querySelector("#evictions tbody");
  const rows = s.evictions.map((e) => el("tr", { "data-pod": e.pod },
    el("td", { text: clock(e.time), title: new Date(e.time * 1000).toISOString() }), el("td", { text: e.pod }), el("td", { text: e.reason || "–" })));
  if (!rows.length) rows.push(el("tr", {}, el("td", { class: "empty", colspan: "3", text: "no evictions since the scheduler started" })));
  body.replaceChildren(...rows);
  document.getElementById("eviction-count").textContent = s.evictions.length ? String(s.evictions.length) : "";
}

// A gang's sub-groups and where each is held, after its own HyperNode.
function subGroups(g) {
  const subs = g.sub_groups || [];
  return subs.length ? "; " + subs.map((x) => `${x.name}: ${x.domain || "waiting"}`).join(", ") : "";
}

// HyperNodes as an indented tree with the main resource free of total and the gangs each holds.
function drawTopology(s) {
  const t = s.topology || { hypernodes: [] };
  document.getElementById("topology-section").hidden = !t.hypernodes.length;
  if (!t.hypernodes.length) return;
  document.getElementById("topology-state").textContent = t.ready ? "" : "not ready: gangs with a topology wait";
  document.getElementById("topology-resource").textContent = `${t.resource} free / total`;
  document.querySelector("#topology tbody").replaceChildren(...t.hypernodes.map((h) => el("tr", { "data-hypernode": h.name },
    el("td", { text: "\u00a0\u00a0".repeat(h.depth) + h.name }), el("td", { text: String(h.tier) }), el("td", { text: String(h.nodes) }),
    el("td", { text: `${h.free} / ${h.total}` }), el("td", { text: h.gangs.join(", ") || "–" }))));
  const rows = t.gangs.map((g) => el("tr", { "data-gang": g.gang }, el("td", { text: g.gang }), el("td", { text: g.constraint }),
    el("td", { text: (g.domain ? `${g.domain} (tier ${g.tier})` : "–") + subGroups(g) }), el("td", { text: g.waiting || "–" })));
  if (!rows.length) rows.push(el("tr", {}, el("td", { class: "empty", colspan: "4", text: "no gang with a network topology" })));
  document.querySelector("#gangs tbody").replaceChildren(...rows);
}

function drawHeader(s) {
  const d = s.decided;
  document.getElementById("session").textContent =
    `session ${s.session} · ${ago(s.time)} · ${Math.round(s.seconds * 1000)} ms · bound ${d.bound}, pipelined ${d.pipelined}, evicted ${d.evicted} · usage from ${s.source}`;
  document.body.dataset.session = String(s.session);
}

function draw(s) {
  drawHeader(s); drawCluster(s); drawQueues(s); drawNodes(s); drawTopology(s); drawPending(s); drawEvictions(s);
}

function setStatus(cls, text) {
  const st = document.getElementById("status");
  st.className = "status " + cls; st.textContent = text;
}

async function poll() {
  try {
    const r = await fetch("/ui/state.json", { cache: "no-store" });
    if (r.status === 503) { setStatus("wait", "waiting for the first session…"); failures = 0; return; }
    if (!r.ok) throw new Error("HTTP " + r.status);
    const s = await r.json();
    failures = 0;
    setStatus("ok", "live");
    if (s.session !== lastSession) { last = s; lastSession = s.session; draw(s); }
    else drawHeader(s);
  } catch (e) {
    failures++;
    if (failures > 1) setStatus("stale", "not updating: " + e.message);
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

document.getElementById("show-generic").addEventListener("change", () => last && drawQueues(last));
document.getElementById("pending-filter").addEventListener("input", () => last && drawPending(last));
poll();
