// maskd's page: run history, a run's curves, a form to start a run, a fill-mask
// playground and a text-classification one. Plain DOM over the HTTP API; text always goes in with textContent.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const el = (tag, attrs = {}, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v; else if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k);
  return e;
};

// The token travels in an HttpOnly cookie the server sets when the page is opened with
// ?token= (the link `make run` prints), so this script never sees it. A 401 shows
// the login form, which sends a typed token the same way.
localStorage.removeItem("maskd-token");  // where an older page kept it

async function api(method, path, body) {
  const headers = {};
  // Every request that changes state says JSON: the server refuses other types, which
  // a form on another site could send.
  if (method !== "GET") headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 401) showLogin();
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (_) { data = { error: text }; }
  if (!r.ok) {
    const d = data && data.detail != null ? ": " + (typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail)) : "";
    throw new Error(`${r.status} ${(data && data.error) || r.statusText}${d}`);
  }
  return data;
}

function showLogin() {
  const f = $("#login");
  if (f.hidden) { f.hidden = false; $("#login-msg").textContent = ""; }
}
$("#login").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = ev.target, msg = $("#login-msg");
  msg.className = "msg"; msg.textContent = "…";
  // The server answers a right token with the cookie and a redirect to the page, a wrong one with 401.
  const r = await fetch("/?token=" + encodeURIComponent(f.token.value), { cache: "no-store" });
  f.token.value = "";
  if (r.ok) {
    f.hidden = true;
    msg.textContent = "";
  } else {
    msg.className = "msg error";
    msg.textContent = r.status === 401 ? "That is not this server's token." : `Cannot log in: ${r.status}`;
  }
});

// ---- formatting ----
const fmtNum = (x, d = 4) => (x == null || !isFinite(x) ? "–" : Number(x).toPrecision(d));
function fmtDuration(s) {
  if (s == null || !isFinite(s)) return "–";
  s = Math.max(0, Math.round(s));
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
  return h ? `${h}h ${m}m` : m ? `${m}m ${sec}s` : `${sec}s`;
}
function fmtTime(t) {
  if (!t) return "–";
  const d = new Date(t * 1000);
  return d.toLocaleDateString(undefined, { month: "short", day: "numeric" }) + " " +
         d.toLocaleTimeString(undefined, { hour: "2-digit", minute: "2-digit" });
}
const statusBadge = (s) => el("span", { class: "status " + s, text: s });
function duration(r) {
  if (!r.started) return null;
  return (r.finished || Date.now() / 1000) - r.started;
}

// ---- views ----
let cleanup = [];
function leave() { cleanup.forEach((f) => f()); cleanup = []; }

function show(name) {
  document.querySelectorAll(".view").forEach((v) => (v.hidden = v.id !== "view-" + name));
  document.querySelectorAll("nav a").forEach((a) => a.classList.toggle("active", a.dataset.nav === name));
}

function route() {
  leave();
  const h = location.hash.replace(/^#/, "") || "/";
  let m;
  if ((m = h.match(/^\/runs\/([^/]+)$/))) return showRun(decodeURIComponent(m[1]));
  if (h === "/new") return showNew();
  if (h === "/playground") return showPlayground();
  if (h === "/classify") return showClassify();
  return showRuns();
}
window.addEventListener("hashchange", route);

// Runs table, refreshed every two seconds while shown.
function showRuns() {
  show("runs");
  const tbody = $("#runs-table tbody"), status = $("#runs-status");
  async function refresh() {
    try {
      const runs = await api("GET", "/runs");
      tbody.replaceChildren(...runs.map((r) => {
        const tr = el("tr", { "data-run": r.id },
          el("td", {}, el("a", { href: "#/runs/" + r.id, text: r.name })),
          el("td", {}, statusBadge(r.status)),
          el("td", { text: r.model || "–" }),
          el("td", { text: r.total_steps ? `${r.step} / ${r.total_steps}` : String(r.step || 0) }),
          el("td", { text: fmtNum(r.best_eval_loss) }),
          el("td", { text: fmtDuration(duration(r)) }),
          el("td", { text: fmtTime(r.started) }));
        tr.addEventListener("click", (e) => { if (e.target.tagName !== "A") location.hash = "#/runs/" + r.id; });
        return tr;
      }));
      status.textContent = runs.length ? `${runs.length} run${runs.length > 1 ? "s" : ""} · updates live` :
        "No runs yet: start one from “New run”.";
    } catch (e) { status.textContent = "Cannot load runs: " + e.message; }
  }
  refresh();
  const t = setInterval(refresh, 2000);
  cleanup.push(() => clearInterval(t));
}

// ---- charts: plain SVG line charts ----
const SVGNS = "http://www.w3.org/2000/svg";
const sv = (tag, attrs = {}, text) => {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text != null) e.textContent = text;
  return e;
};
function niceTicks(lo, hi, n) {
  if (lo === hi) { lo -= 1; hi += 1; }
  const step0 = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(step0)));
  const step = [1, 2, 2.5, 5, 10].map((f) => f * mag).find((s) => s >= step0) || step0;
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) ticks.push(+v.toPrecision(12));
  return ticks;
}
function drawChart(svg, pts, xlabel) {
  const W = 320, H = 180, L = 46, R = 10, T = 10, B = 28;
  svg.replaceChildren();
  pts = pts.filter((p) => p.y != null && isFinite(p.y));
  svg.dataset.points = pts.length;
  if (!pts.length) {
    svg.append(sv("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, "no data yet"));
    return;
  }
  let x0 = Math.min(...pts.map((p) => p.x)), x1 = Math.max(...pts.map((p) => p.x));
  let y0 = Math.min(...pts.map((p) => p.y)), y1 = Math.max(...pts.map((p) => p.y));
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { const d = Math.abs(y0) * 0.05 || 1; y0 -= d; y1 += d; }
  const yt = niceTicks(y0, y1, 4);
  y0 = Math.min(y0, yt[0]); y1 = Math.max(y1, yt[yt.length - 1]);
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const Y = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  for (const t of yt) {
    svg.append(sv("line", { x1: L, x2: W - R, y1: Y(t), y2: Y(t), class: "grid" }));
    svg.append(sv("text", { x: L - 4, y: Y(t) + 3, "text-anchor": "end" }, Math.abs(t) < 1e-3 && t ? t.toExponential(0) : +t.toPrecision(3)));
  }
  for (const t of niceTicks(x0, x1, 4)) {
    if (t < x0 || t > x1) continue;
    svg.append(sv("text", { x: X(t), y: H - B + 13, "text-anchor": "middle" }, +t.toPrecision(4)));
  }
  svg.append(sv("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
  svg.append(sv("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  svg.append(sv("text", { x: (L + W - R) / 2, y: H - 2, "text-anchor": "middle" }, xlabel));
  svg.append(sv("polyline", { points: pts.map((p) => `${X(p.x).toFixed(1)},${Y(p.y).toFixed(1)}`).join(" ") }));
  if (pts.length <= 30)
    for (const p of pts) {
      const c = sv("circle", { cx: X(p.x), cy: Y(p.y), r: 2.5 });
      c.append(sv("title", {}, `${xlabel} ${p.x}: ${p.y}`));
      svg.append(c);
    }
}

// A run: summary, curves and revisions, live over server-sent events.
function showRun(id) {
  show("run");
  const steps = [], epochs = [];
  let run = null;
  const summary = $("#run-summary");
  const cancelBtn = $("#run-cancel"), cancelMsg = $("#run-cancel-msg");
  cancelMsg.textContent = "";
  summary.replaceChildren();
  $("#run-title").textContent = "Run " + id;

  function renderSummary() {
    if (!run) return;
    $("#run-title").replaceChildren(document.createTextNode(run.name + " "), statusBadge(run.status));
    const items = [
      ["Step", run.total_steps ? `${run.step} / ${run.total_steps}` : run.step],
      ["Epoch", run.epoch], ["Loss", fmtNum(run.loss)], ["Best val. loss", fmtNum(run.best_eval_loss)],
      ["Tokens/s", run.tokens_per_s ? Math.round(run.tokens_per_s).toLocaleString() : "–"],
      ["ETA", run.status === "running" ? fmtDuration(run.eta_s) : "–"], ["Duration", fmtDuration(duration(run))],
      ["Model", run.model || "–"],
      // Runs stored before precisions existed have none in their config: they trained in fp32.
      ["Precision", run.config ? run.config.precision || "fp32" : "–"],
    ];
    // A data-parallel run: where its ranks ran, each one's rate, and how much of the
    // gradient exchange backward hid.
    const d = run.dist;
    if (d && d.ranks > 1) {
      const rates = (d.tokens_per_s || []).map((t, q) => `${q}: ${Math.round(t).toLocaleString()}`).join(", ");
      items.push(["Ranks", `${d.ranks} on ${[...new Set(d.hosts || [])].join(", ")}`],
        ["Tokens/s per rank", rates || "–"],
        ["Communication", `${fmtNum(d.comm_exchange_s)} s, ${Math.round(100 * (d.comm_hidden || 0))}% hidden behind backward`]);
    }
    summary.replaceChildren(...items.map(([k, v]) => el("div", {}, el("b", { text: k }), el("span", { text: String(v) }))));
    if (run.error) summary.append(el("div", {}, el("b", { text: "Error" }), el("span", { text: run.error })));
    $("#run-bar").style.width = run.total_steps ? (100 * run.step / run.total_steps).toFixed(1) + "%" : "0";
    cancelBtn.hidden = run.status !== "running";
  }
  function renderCharts() {
    drawChart($("#chart-loss"), steps.map((s) => ({ x: s.step, y: s.loss })), "step");
    drawChart($("#chart-lr"), steps.map((s) => ({ x: s.step, y: s.lr })), "step");
    drawChart($("#chart-eval-loss"), epochs.map((e) => ({ x: e.epoch + 1, y: e.eval_loss })), "epoch");
    drawChart($("#chart-accuracy"), epochs.map((e) => ({ x: e.epoch + 1, y: e.eval_accuracy })), "epoch");
    drawChart($("#chart-perplexity"), epochs.map((e) => ({ x: e.epoch + 1, y: e.perplexity })), "epoch");
  }
  function renderDetails(full) {
    const rows = Object.entries(full.config || {}).map(([k, v]) => el("tr", {}, el("td", { text: k }), el("td", { text: String(v) })));
    $("#config-table tbody").replaceChildren(...rows);
    const revs = full.revisions || [];
    $("#rev-table tbody").replaceChildren(...(revs.length ? revs.map((r) => {
      const files = el("td");
      for (const f of ["config.json", "model.safetensors", "tokenizer.json"]) {
        files.append(el("a", { href: `/models/${encodeURIComponent(full.name)}/resolve/${r.commit}/${f}`, text: f }), " ");
      }
      return el("tr", {}, el("td", { text: r.seq }), el("td", { text: r.commit.slice(0, 10) }), el("td", { text: r.message }),
                el("td", { text: r.step }), el("td", { text: fmtNum(r.metrics && r.metrics.eval_loss) }), files);
    }) : [el("tr", {}, el("td", { colspan: 6, class: "muted", text: "No revision pushed yet." }))]));
  }
  async function loadDetails() {
    try {
      const full = await api("GET", "/runs/" + encodeURIComponent(id));
      run = Object.assign(run || {}, full);
      renderSummary();
      renderDetails(full);
    } catch (e) { $("#run-title").textContent = "Run " + id + ": " + e.message; }
  }

  renderCharts();
  loadDetails();
  const es = new EventSource("/runs/" + encodeURIComponent(id) + "/events");
  es.addEventListener("progress", (ev) => {
    const p = JSON.parse(ev.data);
    const revisionsBefore = run && run.step;
    run = Object.assign(run || {}, p);
    renderSummary();
    if (p.status !== "running" || revisionsBefore !== p.step) loadDetails();
  });
  es.addEventListener("metrics", (ev) => {
    const m = JSON.parse(ev.data);
    steps.push(...m.steps);
    epochs.push(...m.epochs);
    renderCharts();
  });
  es.addEventListener("end", () => { es.close(); loadDetails(); });
  cleanup.push(() => es.close());
  const t = setInterval(() => run && run.status === "running" && renderSummary(), 1000);
  cleanup.push(() => clearInterval(t));

  cancelBtn.onclick = async () => {
    cancelBtn.disabled = true;
    try {
      const r = await api("POST", "/runs/" + encodeURIComponent(id) + "/cancel");
      cancelMsg.textContent = "Cancelling: the run stops after saving a checkpoint (" + r.status + ").";
    } catch (e) { cancelMsg.textContent = e.message; }
    cancelBtn.disabled = false;
  };
}

// The form names what the server knows (its tokenizers and datasets, or paths inside
// its data folder: the API takes no host paths), prefilled from the newest training
// job's names so a second run is one click.
async function showNew() {
  show("new");
  const f = $("#new-form"), msg = $("#new-msg");
  msg.textContent = ""; msg.className = "msg";
  if (!f.name.value) f.name.value = "run-" + new Date().toISOString().slice(0, 16).replace(/[-:T]/g, "");
  try {
    const [toks, sets] = await Promise.all([api("GET", "/tokenizers"), api("GET", "/datasets")]);
    $("#known-tokenizers").replaceChildren(...toks.map((t) => el("option", { value: t.name })));
    $("#known-datasets").replaceChildren(...sets.map((d) => el("option", { value: d.name })));
    const jobs = await api("GET", "/jobs");
    const last = jobs.find((j) => j.kind === "train" && j.params && j.params.tokenizer);
    if (last && !f.tokenizer.value)
      for (const k of ["tokenizer", "train", "validation"]) if (last.params[k]) f[k].value = last.params[k];
  } catch (_) { /* the form works without suggestions */ }
}
$("#new-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = ev.target, msg = $("#new-msg"), btn = f.querySelector("button");
  const body = { name: f.name.value, tokenizer: f.tokenizer.value, train: f.train.value, config: f.config.value };
  if (f.validation.value) body.validation = f.validation.value;
  for (const k of ["epochs", "max_steps", "batch", "warmup_steps", "seed", "threads"]) body[k] = parseInt(f[k].value, 10);
  body.lr = parseFloat(f.lr.value);
  body.precision = f.precision.value;
  btn.disabled = true;
  msg.className = "msg"; msg.textContent = "Submitting…";
  try {
    const job = await api("POST", "/runs", body);
    msg.className = "msg ok";
    msg.textContent = `Queued as job ${job.id}; waiting for it to start…`;
    for (let i = 0; i < 600; i++) {
      const j = await api("GET", "/jobs/" + job.id);
      if (j.run) { location.hash = "#/runs/" + j.run; break; }
      if (j.status !== "queued" && j.status !== "running") { msg.className = "msg error"; msg.textContent = `Job ${j.status}: ${j.error || ""}`; break; }
      msg.textContent = `Job ${job.id} is ${j.status}…`;
      await new Promise((r) => setTimeout(r, 500));
    }
  } catch (e) { msg.className = "msg error"; msg.textContent = e.message; }
  btn.disabled = false;
});

// The playground: every revision of every model, top-k predictions as bars.
async function showPlayground() {
  show("playground");
  const sel = $("#fill-model");
  try {
    const models = await api("GET", "/models");
    const opts = [];
    for (const m of models) {
      const full = await api("GET", "/models/" + encodeURIComponent(m.name));
      opts.push(el("option", { value: m.name, text: `${m.name} (newest)` }));
      for (const r of full.revisions || [])
        opts.push(el("option", { value: `${m.name}@${r.commit}`, text: `${m.name}@${r.commit.slice(0, 8)} · ${r.message}` }));
    }
    const keep = sel.value;
    sel.replaceChildren(...opts);
    if (keep) sel.value = keep;
    if (!opts.length) $("#fill-msg").textContent = "No model in the store yet: train one first.";
  } catch (e) { $("#fill-msg").textContent = "Cannot list models: " + e.message; }
}
$("#fill-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = ev.target, msg = $("#fill-msg"), out = $("#fill-results");
  const parameters = { top_k: parseInt(f.top_k.value, 10) || 5 };
  const targets = f.targets.value.split(",").map((s) => s.trim()).filter(Boolean);
  if (targets.length) parameters.targets = targets;
  msg.className = "msg"; msg.textContent = "…";
  try {
    const t0 = performance.now();
    const res = await api("POST", "/fill-mask", { inputs: f.inputs.value, model: f.model.value || undefined, parameters });
    msg.textContent = `${Math.round(performance.now() - t0)} ms`;
    const perMask = Array.isArray(res[0]) ? res : [res];
    // Bars are relative to the best guess of each mask (an untrained model's top score
    // can be 0.3%); the number beside each bar is the probability itself.
    const shown = (t) => (t.trim() ? t : `"${t}" (space)`);
    out.replaceChildren(...perMask.map((preds, i) => el("div", { class: "mask-card" },
      el("h3", { text: perMask.length > 1 ? `Mask ${i + 1}` : "Predictions" }),
      ...preds.map((p) => el("div", { class: "pred" },
        el("span", { class: "tok", text: shown(p.token_str), title: `id ${p.token}` }),
        el("div", { class: "track" }, Object.assign(el("div", { class: "fill" }),
          { style: `width:${(100 * p.score / Math.max(preds[0].score, 1e-12)).toFixed(2)}%` })),
        el("span", { class: "p", text: (100 * p.score).toFixed(2) + "%" }),
        el("span", { class: "seq", text: p.sequence }))))));
  } catch (e) { msg.className = "msg error"; msg.textContent = e.message; out.replaceChildren(); }
});

// The text-classification playground: the revisions of every classifier (a model whose
// config.json names a *ForSequenceClassification architecture), labels as bars.
async function showClassify() {
  show("classify");
  const sel = $("#tc-model"), msg = $("#tc-msg");
  try {
    const models = await api("GET", "/models");
    const opts = [];
    for (const m of models) {
      const name = encodeURIComponent(m.name);
      let cfg = null;
      try { cfg = await api("GET", `/models/${name}/resolve/main/config.json`); } catch (_) { /* listed below anyway */ }
      const arch = cfg && Array.isArray(cfg.architectures) ? String(cfg.architectures[0]) : "";
      if (cfg && !arch.endsWith("ForSequenceClassification")) continue;
      const full = await api("GET", "/models/" + name);
      opts.push(el("option", { value: m.name, text: `${m.name} (newest)` }));
      for (const r of full.revisions || [])
        opts.push(el("option", { value: `${m.name}@${r.commit}`, text: `${m.name}@${r.commit.slice(0, 8)} · ${r.message}` }));
    }
    const keep = sel.value;
    sel.replaceChildren(...opts);
    if (keep) sel.value = keep;
    if (!opts.length) msg.textContent = "No classifier in the store yet: fine-tune one first.";
  } catch (e) { msg.textContent = "Cannot list models: " + e.message; }
}
$("#tc-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = ev.target, msg = $("#tc-msg"), out = $("#tc-results");
  const texts = f.inputs.value.split("\n").map((s) => s.trim()).filter(Boolean);
  if (!texts.length) { msg.className = "msg error"; msg.textContent = "Enter a text."; return; }
  // top_k is always sent, so every text's answer is a sorted list (null: every label).
  const k = parseInt(f.top_k.value, 10);
  const parameters = { top_k: k > 0 ? k : null };
  if (f.function_to_apply.value) parameters.function_to_apply = f.function_to_apply.value;
  if (f.truncation.checked) parameters.truncation = true;
  msg.className = "msg"; msg.textContent = "…";
  try {
    const t0 = performance.now();
    const res = await api("POST", "/text-classification",
      { inputs: texts.length > 1 ? texts : texts[0], model: f.model.value || undefined, parameters });
    msg.textContent = `${Math.round(performance.now() - t0)} ms`;
    const perText = texts.length > 1 ? res : [res];
    // Bars are relative to the largest score shown (logits may be negative: none then
    // draws from the smallest); the number beside each bar is the score itself.
    out.replaceChildren(...perText.map((labels, i) => {
      const scores = labels.map((p) => p.score), lo = Math.min(0, ...scores), hi = Math.max(...scores);
      return el("div", { class: "mask-card" },
        el("h3", { text: texts[i] }),
        ...labels.map((p) => el("div", { class: "pred" },
          el("span", { class: "tok", text: p.label }),
          el("div", { class: "track" }, Object.assign(el("div", { class: "fill" }),
            { style: `width:${(100 * (p.score - lo) / Math.max(hi - lo, 1e-12)).toFixed(2)}%` })),
          el("span", { class: "p", text: f.function_to_apply.value === "none" ? p.score.toFixed(4) : (100 * p.score).toFixed(2) + "%" }))));
    }));
  } catch (e) { msg.className = "msg error"; msg.textContent = e.message; out.replaceChildren(); }
});

route();
