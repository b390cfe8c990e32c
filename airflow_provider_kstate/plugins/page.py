"""The kstate page: one HTML document whose script reads the app's JSON routes (no build step, no CDN).

Query parameters preselect what it shows: ``?tab=topics&conn_id=kafka_default&topic=orders&partitions=12``,
``?tab=runs&topic=orders&run=<folder>``, ``?tab=snapshots``.
"""

from __future__ import annotations

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
    <label>Run to N partitions<input id="partitions" type="number" min="1" placeholder="current"></label>
    <button class="go" id="plan-go" type="submit">Show plan</button>
  </form>
  <div id="plan"></div>
</section>

<section id="runs">
  <form id="runs-form"><label>Topic<select id="run-topic"></select></label></form>
  <div id="run-list"></div><div id="proof"></div>
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
  try {
    const d = await get(`api/plan?${p}`);
    const what = d.mode === "increase" ? `${d.partitions} &rarr; ${d.target} partitions: creates ${num(d.target - d.partitions)} (partition${d.target - d.partitions > 1 ? "s" : ""} ${esc(d.new_partitions)})` : `stays at ${d.partitions} partitions: a repair (seeds every gap, creates nothing)`;
    const rows = d.groups.map((g) => `<tr><td>${esc(g.group)}</td><td><span class="pill ${esc(g.class)}">${esc(g.class)}</span></td><td>${esc(g.type)}</td><td>${esc(g.state)}</td>
      <td class="n">${num(g.member_count)}</td><td>${g.members.map(esc).join("<br>")}</td><td class="n">${num(g.lag)}</td><td class="n">${num(g.without_offset)}</td>
      <td>${[g.pause && "pause", g.seed && "seed", g.wait && "wait"].filter(Boolean).join(", ") || '<span class="muted">left alone</span>'}</td></tr>`).join("");
    el.innerHTML = `<div class="box" id="plan-summary"><b>${esc(d.topic)}</b>: ${d.partitions} partitions now. A run to ${d.target}: ${what}.<br>
      Would pause <b>${d.would_pause.length}</b> group(s)${d.would_pause.length ? ": " + d.would_pause.map(esc).join(", ") : ""};
      seed <b>${d.would_seed.length}</b>${d.would_seed.length ? ": " + d.would_seed.map(esc).join(", ") : ""}; wait for <b>${d.would_wait.length}</b> to come back STABLE.
      ${d.left_alone.length ? "Left alone: " + d.left_alone.map(esc).join(", ") + "." : ""}</div>
      <table id="plan-groups"><thead><tr><th>group</th><th>class</th><th>type</th><th>state</th><th>members</th><th>member ids</th><th>lag</th><th>no offset</th><th>a run would</th></tr></thead>
      <tbody>${rows || '<tr><td colspan="9" class="muted">no group reads this topic</td></tr>'}</tbody></table>
      ${verdictBox(d.broker_check)}<p class="muted">Planned at ${esc(d.planned_at)} on connection <code>${esc(d.conn_id)}</code>.</p>`;
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
    const rows = d.runs.map((r) => `<tr><td><a href="#" data-run="${esc(r.run)}">${esc(r.run)}</a></td><td>${runLink(r.airflow)}</td>
      <td>${r.verdict ? (r.verdict.ok ? '<span class="ok">proved</span>' : '<span class="bad">' + num(r.verdict.problems) + " partitions would skip</span>") : (r.verify_report ? "see proof" : '<span class="muted">no verify report</span>')}</td>
      <td class="n">${r.verdict ? num(r.verdict.partitions) : ""}</td><td class="n">${r.verdict ? num(r.verdict.groups) : ""}</td><td>${esc(new Date(1000 * r.modified).toISOString().replace(".000", ""))}</td></tr>`).join("");
    const more = d.total > offset + d.limit ? `<button class="go" id="runs-more">next ${d.limit}</button>` : "";
    el.innerHTML = `<h2>Runs of ${esc(topic)} (${num(d.total)})</h2><table id="run-table"><thead><tr><th>report folder</th><th>Airflow run</th><th>verdict</th><th>partitions</th><th>groups</th><th>written</th></tr></thead><tbody>${rows}</tbody></table>${more}`;
    el.querySelectorAll("a[data-run]").forEach((a) => a.onclick = (e) => { e.preventDefault(); proof(topic, a.dataset.run, 0); });
    if ($("runs-more")) $("runs-more").onclick = () => loadRuns(offset + d.limit);
    if (q.get("run") && offset === 0 && !$("proof").innerHTML) proof(topic, q.get("run"), 0);
  } catch (e) { fail(el, e); }
}
async function proof(topic, run, offset) {
  const el = $("proof"); el.innerHTML = '<p class="muted">Reading the reports ...</p>';
  try {
    const d = await get(`api/runs/${encodeURIComponent(topic)}/${encodeURIComponent(run)}?offset=${offset}&limit=50`);
    if (!d.verified) { el.innerHTML = `<div class="box">${esc(run)}: no verify report (the run did not reach verify).</div>`; return; }
    const rows = d.groups.map((g) => `<tr><td>${esc(g.group)}</td><td>${g.ok ? '<span class="ok">no message skipped</span>' : '<span class="bad">would skip: ' + esc(g.skipping_partitions) + "</span>"}</td>
      <td class="n">${num(g.partitions)}</td><td>${esc(g.new_partitions)}</td><td>${esc(g.seeded_by_run)}</td><td class="n">${num(g.lag)}</td><td class="n">${num(g.max_lag)}</td></tr>`).join("");
    const nav = (d.offset > 0 ? `<button class="go" id="proof-prev">previous</button> ` : "") + (d.total > d.offset + d.limit ? `<button class="go" id="proof-next">next ${d.limit} groups</button>` : "");
    el.innerHTML = `<h2>What ${esc(run)} proved</h2><div class="box" id="proof-summary">${d.ok ? '<span class="ok">Proved</span>: every group holds an offset on every one of the ' + num(d.partitions) + " partitions from which no message is skipped." : '<span class="bad">Not proved</span>: some partitions would have messages skipped.'}
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
"""
