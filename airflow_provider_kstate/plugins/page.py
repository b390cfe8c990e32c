"""The kstate page: one HTML document whose script reads the app's JSON routes (no build step, no CDN).

Query parameters preselect what it shows: ``?tab=topics&conn_id=kafka_default&topic=orders&partitions=12``,
``?tab=runs&topic=orders&run=<folder>``, ``?tab=snapshots``.

A run's view polls its progress (``api/runs/<topic>/<folder>/progress``) every :data:`POLL_MS` ms while the
run goes, and ticks each out group's downtime between two answers (from the server's clock, so a skewed
browser clock does not matter); it stops polling once the run ended and shows the proof below the final
downtimes. The run list refreshes every :data:`LIST_POLL_MS` ms while it shows a run in progress.
"""

from __future__ import annotations

#: How often a run's view asks for the run's progress while it goes (ms).
POLL_MS = 1500
#: How often the run list refreshes while it shows a run in progress (ms).
LIST_POLL_MS = 5000

PAGE = r"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kstate</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
:root { --fg:#1a202c; --muted:#4a5568; --line:#e2e8f0; --accent:#0b6bcb; --ok:#2f855a; --bad:#c53030; --warn:#b7791f; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); margin: 0; padding: 16px 20px; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 18px 0 8px; }
.sub { color: var(--muted); margin: 0 0 12px; }
nav button { border: 1px solid var(--line); background: #f7fafc; padding: 6px 14px; margin-right: 4px; border-radius: 6px 6px 0 0; cursor: pointer; font-size: 14px; }
nav button.on { background: #fff; border-bottom-color: #fff; font-weight: 600; color: var(--accent); }
section { border-top: 1px solid var(--line); padding-top: 12px; display: none; } section.on { display: block; }
form { display: flex; gap: 10px; align-items: end; flex-wrap: wrap; margin-bottom: 12px; }
label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); gap: 2px; }
input, select { font-size: 14px; padding: 5px 8px; border: 1px solid #cbd5e0; border-radius: 5px; min-width: 120px; }
button.go { background: var(--accent); color: #fff; border: 0; border-radius: 5px; padding: 7px 14px; font-size: 14px; cursor: pointer; }
table { border-collapse: collapse; width: 100%; margin: 4px 0 10px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { background: #f7fafc; font-weight: 600; font-size: 12px; color: var(--muted); text-transform: uppercase; letter-spacing: .02em; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.pill { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; font-weight: 600; background: #edf2f7; }
.active { background: #e6fffa; color: #234e52; } .empty { background: #ebf8ff; color: #2a4365; }
.spark, .excluded, .absent { background: #fefcbf; color: #744210; } .share, .streams { background: #fed7d7; color: #742a2a; }
.ok { color: var(--ok); font-weight: 600; } .bad { color: var(--bad); font-weight: 600; } .muted { color: var(--muted); }
.box { border: 1px solid var(--line); border-radius: 8px; padding: 10px 14px; margin: 8px 0; background: #fcfdff; }
.err { border-color: #feb2b2; background: #fff5f5; color: var(--bad); }
.ph-running { background: #ebf8ff; color: #2a4365; } .ph-success { background: #c6f6d5; color: #22543d; } .ph-failed { background: #fed7d7; color: #742a2a; }
.st-planned { color: var(--muted); } .st-stopping, .st-paused, .st-seeded { background: #feebc8; color: #7b341e; }
.st-resumed, .st-at_barrier, .st-draining { background: #e6fffa; color: #234e52; } .st-drained, .st-passed { background: #c6f6d5; color: #22543d; }
code { background: #f1f5f9; padding: 0 4px; border-radius: 3px; }
a { color: var(--accent); }
</style></head>
<body>
<h1>kstate</h1>
<p class="sub">Before an increase: what it will do. After: what it proved. Read-only: nothing here changes a topic, a group or a snapshot.</p>
<nav><button data-tab="topics">Topics</button><button data-tab="runs">Runs</button><button data-tab="snapshots">Snapshots</button></nav>

<section id="topics">
  <form id="plan-form">
    <label>Connection<input id="conn" value="kafka_default"></label>
    <label>Topic<input id="topic" list="topic-list" placeholder="orders" required></label>
    <datalist id="topic-list"></datalist>
    <label>With co-partitioned topics<input id="more-topics" placeholder="payments, ... (grown together)"></label>
    <label>Run to N partitions<input id="partitions" type="number" min="1" placeholder="current"></label>
    <button class="go" id="plan-go" type="submit">Show plan</button>
  </form>
  <div id="plan"></div>
</section>

<section id="runs">
  <form id="runs-form"><label>Topic<select id="run-topic"></select></label></form>
  <div id="run-list"></div><div id="live"></div><div id="proof"></div>
</section>

<section id="snapshots"><div id="snaps"></div></section>

<script>
const q = new URLSearchParams(location.search);
const $ = (id) => document.getElementById(id);
const esc = (v) => String(v ?? "").replace(/[&<>"']/g, (c) => ({"&":"&amp;","<":"&lt;",">":"&gt;",'"':"&quot;","'":"&#39;"}[c]));
const num = (v) => (v === null || v === undefined) ? "" : Number(v).toLocaleString("en-US");
async function get(path) {
  const r = await fetch(path, {credentials: "same-origin", headers: {"Accept": "application/json"}});
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.detail ? (typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail)) : r.status + " " + r.statusText);
  return body;
}
function fail(el, e) { el.innerHTML = `<div class="box err">${esc(e.message || e)}</div>`; }
const POLL_MS = __POLL_MS__, LIST_POLL_MS = __LIST_POLL_MS__;
const enc = encodeURIComponent;
const secs = (s) => (s === null || s === undefined) ? "" : Number(s).toFixed(1) + " s";
const clock = (ms) => ms ? new Date(ms).toISOString().slice(11, 23) : "";
let watching = null, listTimer = null, listOffset = 0;
// the downtime so far of each group still out, and the run's age, count up between two answers
setInterval(() => document.querySelectorAll("[data-tick]").forEach((e) => {
  e.textContent = secs(Number(e.dataset.tick) + (performance.now() - Number(e.dataset.at)) / 1000); }), 250);
function runLink(a) { return a ? `<a target="_top" href="../dags/${encodeURIComponent(a.dag_id)}/runs/${encodeURIComponent(a.run_id)}">${esc(a.dag_id)} / ${esc(a.run_id)}</a> <span class="muted">${esc(a.state)}</span>` : '<span class="muted">not in this Airflow</span>'; }

function show(tab) {
  document.querySelectorAll("nav button").forEach((b) => b.classList.toggle("on", b.dataset.tab === tab));
  document.querySelectorAll("section").forEach((s) => s.classList.toggle("on", s.id === tab));
  if (tab === "runs") loadRuns(); if (tab === "snapshots") loadSnapshots();
}
document.querySelectorAll("nav button").forEach((b) => b.onclick = () => show(b.dataset.tab));

async function loadTopics() {
  try { const t = await get(`api/topics?conn_id=${encodeURIComponent($("conn").value)}`);
    $("topic-list").innerHTML = t.topics.map((n) => `<option value="${esc(n)}">`).join(""); } catch (e) { /* shown on plan */ }
}
function verdictBox(v) {
  if (!v || !v.checked) return '<div class="box"><b>Broker check:</b> <span class="muted">not checked yet</span></div>';
  const broken = v.broken || [];
  return `<div class="box"><b>Broker check</b> (${esc(v.cluster)}, ${esc(new Date(1000 * v.checked_at).toISOString())}): ` +
    (broken.length ? `<span class="bad">broken: ${broken.map(esc).join(", ")}</span>` : '<span class="ok">every promise kept</span>') + "</div>";
}
async function plan(ev) {
  if (ev) ev.preventDefault();
  const el = $("plan"); el.innerHTML = '<p class="muted">Asking the cluster (dry run, no lease) ...</p>';
  const p = new URLSearchParams({topic: $("topic").value, conn_id: $("conn").value});
  if ($("partitions").value) p.set("partitions", $("partitions").value);
  if ($("more-topics").value.trim()) p.set("topics", $("more-topics").value);
  try {
    const d = await get(`api/plan?${p}`);
    const what = d.mode === "increase" ? `${d.partitions} &rarr; ${d.target} partitions: creates ${num(d.target - d.partitions)} (partition${d.target - d.partitions > 1 ? "s" : ""} ${esc(d.new_partitions)})` : `stays at ${d.partitions} partitions: a repair (seeds every gap, creates nothing)`;
    const several = (d.topics || []).length > 1;  // co-partitioned topics grown together: one run
    const rows = d.groups.map((g) => `<tr><td>${esc(g.group)}${several ? ' <span class="muted reads">reads ' + (g.topics || []).map(esc).join(", ") + "</span>" : ""}</td><td><span class="pill ${esc(g.class)}">${esc(g.class)}</span></td><td>${esc(g.type)}</td><td>${esc(g.state)}</td>
      <td class="n">${num(g.member_count)}</td><td>${g.members.map(esc).join("<br>")}</td><td class="n">${num(g.lag)}</td><td class="n">${num(g.without_offset)}</td>
      <td>${[g.pause && "pause", g.seed && "seed", g.wait && "wait"].filter(Boolean).join(", ") || '<span class="muted">left alone</span>'}</td>
      <td class="driver">${g.driver_problem ? '<span class="bad" title="' + esc(g.driver_problem) + '">no driver</span>' : esc(g.driver)}</td>
      <td class="order" title="${esc(g.key_order_reason)}">${esc(g.key_order)}</td></tr>`).join("");
    const stuck = Object.entries(d.cannot_drive || {});
    const refusal = stuck.length ? `<div class="box err" id="plan-refusal"><b>A run would be refused before anything is paused</b>: ${stuck.map(([g, why]) => esc(g) + ": " + esc(why)).join("; ")}. Give each a driver (group_drivers), exclude it, or adopt the client piece.</div>` : "";
    const set = several ? `<table id="plan-topics"><thead><tr><th>co-partitioned topic (one run)</th><th>partitions now</th><th>after</th><th>new partitions</th></tr></thead><tbody>${d.topics.map((t) => `<tr><td>${esc(t.topic)}</td><td class="n">${num(t.partitions)}</td><td class="n">${num(t.target)}</td><td>${esc(t.new_partitions)}</td></tr>`).join("")}</tbody></table>` : "";
    const head = several ? `<b>${d.topics.map((t) => esc(t.topic)).join(" + ")}</b> (co-partitioned, one plan, one lease set, one window)` : `<b>${esc(d.topic)}</b>`;
    el.innerHTML = `${set}<div class="box" id="plan-summary">${head}: ${d.partitions} partitions now. A run to ${d.target}: ${what}.<br>
      Would pause <b>${d.would_pause.length}</b> group(s)${d.would_pause.length ? ": " + d.would_pause.map(esc).join(", ") : ""};
      seed <b>${d.would_seed.length}</b>${d.would_seed.length ? ": " + d.would_seed.map(esc).join(", ") : ""}; wait for <b>${d.would_wait.length}</b> to come back STABLE.
      ${d.left_alone.length ? "Left alone: " + d.left_alone.map(esc).join(", ") + "." : ""}</div>
      <table id="plan-groups"><thead><tr><th>group</th><th>class</th><th>type</th><th>state</th><th>members</th><th>member ids</th><th>lag</th><th>no offset</th><th>a run would</th><th>driver</th><th>key order</th></tr></thead>
      <tbody>${rows || '<tr><td colspan="11" class="muted">no group reads this topic</td></tr>'}</tbody></table>
      ${refusal}${verdictBox(d.broker_check)}<p class="muted">Planned at ${esc(d.planned_at)} on connection <code>${esc(d.conn_id)}</code>.</p>`;
  } catch (e) { fail(el, e); }
}
$("plan-form").onsubmit = plan;

async function loadRuns(offset = 0) {
  const el = $("run-list");
  try {
    const topic = $("run-topic").value || q.get("topic") || "";
    const d = await get(`api/runs?${new URLSearchParams({topic, offset, limit: 20})}`);
    const sel = $("run-topic");
    if (!sel.options.length) { sel.innerHTML = '<option value="">choose a topic</option>' + d.topics.map((t) => `<option>${esc(t)}</option>`).join(""); sel.value = topic; sel.onchange = () => loadRuns(0); }
    if (!topic) { el.innerHTML = d.topics.length ? '<p class="muted">Choose a topic.</p>' : '<p class="muted">No increase run has written a report yet.</p>'; return; }
    const rows = d.runs.map((r) => `<tr data-row="${esc(r.run)}"><td><a href="#" data-run="${esc(r.run)}">${esc(r.run)}</a>${topicsOf(r.progress, topic)}</td><td>${runLink(r.airflow)}</td>
      <td>${r.verdict ? (r.verdict.ok ? '<span class="ok">proved</span>' : '<span class="bad">' + num(r.verdict.problems) + " partitions would skip</span>") : (r.verify_report ? "see proof" : '<span class="muted">no verify report</span>')}</td>
      <td class="n">${r.verdict ? num(r.verdict.partitions) : ""}</td><td class="n">${r.verdict ? num(r.verdict.groups) : ""}</td><td class="progress">${phasePill(r.progress)}</td><td>${esc(new Date(1000 * r.modified).toISOString().replace(".000", ""))}</td></tr>`).join("");
    const more = d.total > offset + d.limit ? `<button class="go" id="runs-more">next ${d.limit}</button>` : "";
    el.innerHTML = `<h2>Runs of ${esc(topic)} (${num(d.total)})</h2><table id="run-table"><thead><tr><th>report folder</th><th>Airflow run</th><th>verdict</th><th>partitions</th><th>groups</th><th>progress</th><th>written</th></tr></thead><tbody>${rows}</tbody></table>${more}`;
    el.querySelectorAll("a[data-run]").forEach((a) => a.onclick = (e) => { e.preventDefault(); openRun(topic, a.dataset.run); });
    if ($("runs-more")) $("runs-more").onclick = () => loadRuns(offset + d.limit);
    listOffset = offset; clearTimeout(listTimer);
    if (d.runs.some((r) => r.progress && r.progress.phase === "running")) listTimer = setTimeout(() => { if ($("runs").classList.contains("on")) loadRuns(listOffset); }, LIST_POLL_MS);
    if (q.get("run") && offset === 0 && !watching) openRun(topic, q.get("run"));
  } catch (e) { fail(el, e); }
}
function topicsOf(p, topic) {  // a run of several co-partitioned topics names them all
  if (!p || !p.topics || p.topics.length < 2) return "";
  return ` <span class="muted topics">with ${p.topics.filter((t) => t !== topic).map(esc).join(", ")}</span>`;
}
function phasePill(p) {
  if (!p || p.phase === "absent") return '<span class="muted">not recorded</span>';
  const at = `<span class="muted">at step</span> <code class="step">${esc(p.step)}</code>`;
  if (p.phase === "running") return `<span class="pill ph-running">in progress</span> ${at}`;
  if (p.phase === "ended") return `<span class="pill ph-${p.outcome === "success" ? "success" : "failed"}">${esc(p.outcome)}</span> ${at}`;
  if (p.phase === "interrupted") return `<span class="pill ph-failed" title="its Airflow run ended before the run recorded an outcome">interrupted</span> ${at}`;
  return `<span class="pill ph-failed" title="${esc(p.problem)}">unreadable</span>`;
}
function openRun(topic, run) {
  if (watching) clearTimeout(watching.timer);
  const w = watching = {topic, run, timer: null, errors: 0, seen: false};
  $("live").innerHTML = '<p class="muted">Reading the run\'s progress ...</p>'; $("proof").innerHTML = "";
  pollRun(w);
}
async function pollRun(w) {
  let d = null;
  try { d = await get(`api/runs/${enc(w.topic)}/${enc(w.run)}/progress`); w.errors = 0; }
  catch (e) { w.errors += 1; if (watching === w) { if (w.seen && $("live-note")) $("live-note").textContent = `refresh failed (${e.message || e}): trying again`; else fail($("live"), e); } }
  if (watching !== w) return;  // another run was opened meanwhile
  if (d) { d.fetched = performance.now(); renderLive(d); listRow(w.run, d); }
  if (d && d.running) w.seen = true;
  if (d ? d.running : (w.seen && w.errors < 5)) { w.timer = setTimeout(() => pollRun(w), POLL_MS); return; }
  proof(w.topic, w.run, 0);
  if (w.seen) loadRuns(listOffset);  // it ended while watched: the list shows its outcome
}
function listRow(run, d) {  // the run's row in the list says what its view says
  document.querySelectorAll("#run-table tr[data-row]").forEach((tr) => { if (tr.dataset.row === run) tr.querySelector("td.progress").innerHTML = phasePill(d); });
}
function liveRow(g, tick) {
  const back = g.back_at ? esc(clock(g.back_at)) : (g.still_out ? '<span class="bad">no resume recorded</span>' : "");
  const down = g.downtime_s === null ? '<span class="muted">never out</span>' : secs(g.downtime_s);
  return `<tr data-group="${esc(g.group)}"><td>${esc(g.group)}</td><td class="state"><span class="pill st-${esc(g.state)}">${esc(g.state.replace("_", " "))}</span></td>
    <td class="driver">${esc(g.driver)}</td><td class="order">${esc(g.key_order)}</td><td>${esc(clock(g.out_since))}</td><td>${back}</td>
    <td class="n downtime" ${g.ticking ? tick(g.downtime_s) : ""}>${down}</td></tr>`;
}
function renderLive(d) {
  const el = $("live");
  if (d.phase === "absent") { el.innerHTML = ""; return; }
  if (d.phase === "unreadable") { el.innerHTML = `<div class="box err" id="live-summary">${esc(d.run)}: its progress is <b>unreadable</b> (${esc(d.problem)}).</div>`; return; }
  const tick = (base) => `data-tick="${Number(base)}" data-at="${d.fetched}"`;
  const head = d.running
    ? `<span class="pill ph-running">in progress</span> step <code id="live-step">${esc(d.step)}</code> for <span ${tick(d.elapsed_s)}>${secs(d.elapsed_s)}</span>; ${num(d.groups_out)} group(s) out of their group now. <span class="muted" id="live-note">Refreshes every ${POLL_MS / 1000} s.</span>`
    : `${phasePill(d)}. Ended ${esc(clock(d.updated_at))} UTC, ${secs(d.elapsed_s)} after its plan; longest downtime: ${d.max_downtime_s === null ? "none" : secs(d.max_downtime_s)}. Below, each group's final downtime${d.phase === "ended" ? ", then what the run proved" : ""}.`;
  el.innerHTML = `<h2>Run ${esc(d.run)}</h2><div class="box" id="live-summary"><b>${esc((d.topics || [d.topic]).join(" + "))}</b>${d.topics && d.topics.length > 1 ? " (one run, co-partitioned)" : ""} ${num(d.original_partitions)} &rarr; ${num(d.target_partitions)} partitions: ${head}<br>
    Producers: <span class="pill" id="live-producers">${esc(d.producers)}</span> since ${esc(clock(d.producers_since))} UTC. Airflow run: ${runLink(d.airflow)}</div>
    <table id="live-groups"><thead><tr><th>group</th><th>state</th><th>driver</th><th>key order</th><th>out since (UTC)</th><th>back at (UTC)</th><th>downtime</th></tr></thead>
    <tbody>${d.groups.map((g) => liveRow(g, tick)).join("") || '<tr><td colspan="7" class="muted">no protected group</td></tr>'}</tbody></table>`;
}
async function proof(topic, run, offset) {
  const el = $("proof"); el.innerHTML = '<p class="muted">Reading the reports ...</p>';
  try {
    const d = await get(`api/runs/${encodeURIComponent(topic)}/${encodeURIComponent(run)}?offset=${offset}&limit=50`);
    const several = (d.topics || []).length > 1;  // co-partitioned topics grown together: one run
    const perTopic = several ? `<table id="proof-topics"><thead><tr><th>co-partitioned topic (one run)</th><th>verdict</th><th>partitions</th><th>groups</th></tr></thead><tbody>${d.per_topic.map((t) => `<tr><td>${esc(t.topic)}</td><td>${!t.verified ? '<span class="muted">no verify report</span>' : (t.ok ? '<span class="ok">proved</span>' : '<span class="bad">would skip</span>')}</td><td class="n">${t.verified ? num(t.partitions) : ""}</td><td class="n">${t.verified ? num(t.groups) : ""}</td></tr>`).join("")}</tbody></table>` : "";
    if (!d.verified) { el.innerHTML = `<div class="box">${esc(run)}: no verify report${several ? " on every topic" : ""} (the run did not reach verify).</div>${perTopic}`; return; }
    const rows = d.groups.map((g) => `<tr><td>${esc(g.group)}${several ? ' <span class="muted reads">reads ' + (g.topics || []).map(esc).join(", ") + "</span>" : ""}</td><td>${g.ok ? '<span class="ok">no message skipped</span>' : '<span class="bad">would skip: ' + esc(g.skipping_partitions) + "</span>"}</td>
      <td class="n">${num(g.partitions)}</td><td>${esc(g.new_partitions)}</td><td>${esc(g.seeded_by_run)}</td><td class="n">${num(g.lag)}</td><td class="n">${num(g.max_lag)}</td></tr>`).join("");
    const nav = (d.offset > 0 ? `<button class="go" id="proof-prev">previous</button> ` : "") + (d.total > d.offset + d.limit ? `<button class="go" id="proof-next">next ${d.limit} groups</button>` : "");
    el.innerHTML = `<h2>What ${esc(run)} proved${several ? " on " + d.topics.map(esc).join(" + ") : ""}</h2>${perTopic}<div class="box" id="proof-summary">${d.ok ? '<span class="ok">Proved</span>: every group holds an offset on every one of the ' + num(d.partitions) + " partitions from which no message is skipped." : '<span class="bad">Not proved</span>: some partitions would have messages skipped.'}
      ${num(d.total)} group(s); groups ${d.offset + 1}-${Math.min(d.offset + d.limit, d.total)} below. Airflow run: ${runLink(d.airflow)}</div>
      <table id="proof-table"><thead><tr><th>group</th><th>verdict</th><th>partitions</th><th>created by the run</th><th>seeded by the run (log start)</th><th>lag</th><th>max lag</th></tr></thead><tbody>${rows}</tbody></table>${nav}`;
    if ($("proof-prev")) $("proof-prev").onclick = () => proof(topic, run, Math.max(0, d.offset - d.limit));
    if ($("proof-next")) $("proof-next").onclick = () => proof(topic, run, d.offset + d.limit);
  } catch (e) { fail(el, e); }
}

function progressHtml(p) {
  if (!p) return "";
  if (p.problem) return `<br>Rebuild: <span class="bad">${esc(p.problem)}</span>`;
  const state = p.stale ? `<span class="bad">no update for ${num(Math.round(p.age_seconds))} s: stopped?</span>` : p.state === "failed" ? `<span class="bad">failed: ${esc(p.error)}</span>` : p.state === "done" ? `<span class="ok">done</span>${p.version ? " <code>" + esc(p.version) + "</code>" : ""}` : "<b>running</b>";
  return `<br>Rebuild: ${state} <progress max="100" value="${Number(p.percent) || 0}"></progress> <span class="kstate-progress">${esc(String(p.line || "").replace(/^PROGRESS /, ""))}</span> <span class="muted">updated ${esc(p.updated_at)}</span>`;
}
let snapTimer = null;
async function loadSnapshots() {
  const el = $("snaps"); el.innerHTML = '<p class="muted">Reading manifests ...</p>';
  try {
    const d = await get("api/snapshots");
    if (!d.snapshots.length) { el.innerHTML = '<p class="muted">No snapshot checked or rebuilt yet.</p>'; return; }
    el.innerHTML = d.snapshots.map((s) => {
      const check = (c, name) => c ? `${c.ok ? '<span class="ok">ok</span>' : '<span class="bad">failed: partitions ' + esc(c.failed_partitions.join(", ")) + "</span>"} <span class="muted">${esc(c.at)}</span> ${runLink(c)}` : '<span class="muted">never</span>';
      const parts = s.readable ? Object.entries(s.offsets).slice(0, 64).map(([p, o]) => `<tr><td class="n">${esc(p)}</td><td class="n">${num(o.start)}</td><td class="n">${num(o.end)}</td><td class="n">${num(o.rows)}</td><td>${s.damaged_partitions.includes(Number(p)) ? '<span class="bad">damaged</span>' : ""}</td></tr>`).join("") : "";
      return `<div class="box"><b>${esc(s.uri)}</b>${s.readable ? ` &middot; changelog <code>${esc(s.topic)}</code> &middot; version <code>${esc(s.version || "legacy layout")}</code> &middot; ${num(s.rows)} rows in ${num(s.partitions)} partitions &middot; written ${esc(s.written_at)}` : ` <span class="bad">${esc(s.problem)}</span>`}
        <br>History: ${s.history && s.history.length ? s.history.map((v) => "<code>" + esc(v) + "</code>").join(" ") : '<span class="muted">none</span>'}
        <br>Last fast check: ${check(s.last_fast_check)}<br>Last deep check: ${check(s.last_deep_check)}
        <br>Damaged partitions: ${s.damaged_partitions.length ? '<span class="bad">' + s.damaged_partitions.join(", ") + "</span>" : '<span class="ok">none</span>'}${progressHtml(s.progress)}
        ${parts ? `<table><thead><tr><th>partition</th><th>start offset</th><th>end offset</th><th>rows</th><th></th></tr></thead><tbody>${parts}</tbody></table>` : ""}</div>`;
    }).join("");
    clearTimeout(snapTimer);  // a running rebuild: read again, while this tab shows
    if (d.snapshots.some((s) => s.progress && s.progress.state === "running" && !s.progress.stale)) snapTimer = setTimeout(() => { if ($("snapshots").classList.contains("on")) loadSnapshots(); }, 10000);
  } catch (e) { fail(el, e); }
}

for (const [k, id] of [["conn_id", "conn"], ["topic", "topic"], ["partitions", "partitions"]]) if (q.get(k)) $(id).value = q.get(k);
loadTopics();
show(q.get("tab") || "topics");
if (q.get("topic") && (q.get("tab") || "topics") === "topics") plan();
</script>
</body></html>
""".replace("__POLL_MS__", str(POLL_MS)).replace("__LIST_POLL_MS__", str(LIST_POLL_MS))
