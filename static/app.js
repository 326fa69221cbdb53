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
    // The detail stays on the error too: a form marks the field a 422 names.
    throw Object.assign(new Error(`${r.status} ${(data && data.error) || r.statusText}${d}`), { detail: data && data.detail });
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
// A run's task in words; masked-LM training runs have none.
const TASKS = { "text-classification": "text classification" };
const isClassification = (r) => !!r && r.task === "text-classification";
const taskTag = (task) => el("span", { class: "tag task", text: TASKS[task] || task });
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
  if ((m = h.match(/^\/classify(?:\/(.+))?$/))) return showClassify(m[1] && decodeURIComponent(m[1]));
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
          el("td", {}, el("a", { href: "#/runs/" + r.id, text: r.name }), ...(r.task ? [" ", taskTag(r.task)] : [])),
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
// drawChart(svg, points, xlabel, opts) draws one line; drawChart(svg, [{name, pts}, ...],
// xlabel, opts) several, told apart by colour and dash and named in a legend. opts:
//   yMin, yMax  the y axis spans at least this range (0 and 1 for accuracies and F1s)
//   integerX    x ticks on whole numbers only (epochs)
//   values      each point's value written beside it (when a line has at most 12)
function drawChart(svg, data, xlabel, opts = {}) {
  const W = 320, H = 180, L = 46, R = 10, T = 10, B = 28;
  svg.replaceChildren();
  const series = (data.length && data[0].pts ? data : [{ pts: data }])
    .map((s, i) => ({ name: s.name, i, pts: s.pts.filter((p) => p.y != null && isFinite(p.y)) }));
  const all = series.flatMap((s) => s.pts);
  svg.dataset.points = all.length;
  if (!all.length) {
    svg.append(sv("text", { x: W / 2, y: H / 2, "text-anchor": "middle", class: "empty" }, "no data yet"));
    return;
  }
  let x0 = Math.min(...all.map((p) => p.x)), x1 = Math.max(...all.map((p) => p.x));
  let y0 = Math.min(...all.map((p) => p.y)), y1 = Math.max(...all.map((p) => p.y));
  if (opts.yMin != null) y0 = Math.min(y0, opts.yMin);
  if (opts.yMax != null) y1 = Math.max(y1, opts.yMax);
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { const d = Math.abs(y0) * 0.05 || 1; y0 -= d; y1 += d; }
  const yt = niceTicks(y0, y1, 4);
  y0 = Math.min(y0, yt[0]); y1 = Math.max(y1, yt[yt.length - 1]);
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const Y = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  // Three digits, or as many more as it takes for no two ticks to read the same.
  let digits = 3, fmt;
  do {
    fmt = yt.map((t) => String(Math.abs(t) < 1e-3 && t ? t.toExponential(digits - 3) : +t.toPrecision(digits)));
  } while (new Set(fmt).size < fmt.length && ++digits < 9);
  yt.forEach((t, i) => {
    svg.append(sv("line", { x1: L, x2: W - R, y1: Y(t), y2: Y(t), class: "grid" }));
    svg.append(sv("text", { x: L - 4, y: Y(t) + 3, "text-anchor": "end" }, fmt[i]));
  });
  for (const t of niceTicks(x0, x1, 4)) {
    if (t < x0 || t > x1 || (opts.integerX && !Number.isInteger(t))) continue;
    svg.append(sv("text", { x: X(t), y: H - B + 13, "text-anchor": "middle" }, +t.toPrecision(4)));
  }
  svg.append(sv("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" }));
  svg.append(sv("line", { x1: L, x2: W - R, y1: H - B, y2: H - B, class: "axis" }));
  const named = series.length > 1 && series.every((s) => s.name);
  svg.append(sv("text", { x: named ? L + 40 : (L + W - R) / 2, y: H - 2, "text-anchor": "middle" }, xlabel));
  for (const s of series) {
    if (!s.pts.length) continue;
    const who = s.name ? s.name + ", " : "";
    svg.append(sv("polyline", { class: "s" + s.i, points: s.pts.map((p) => `${X(p.x).toFixed(1)},${Y(p.y).toFixed(1)}`).join(" ") }));
    if (s.pts.length > 30) continue;
    for (const p of s.pts) {
      const c = sv("circle", { cx: X(p.x), cy: Y(p.y), r: 2.5, class: "s" + s.i });
      c.append(sv("title", {}, `${who}${xlabel} ${p.x}: ${p.y}`));
      svg.append(c);
    }
    // Values: above the point of the highest line at that x, below the others' (above
    // again, higher up, where below would leave the plot).
    if (opts.values && s.pts.length <= 12)
      for (const p of s.pts) {
        const x = X(p.x);
        const under = series.some((o) => o !== s && o.pts.some((q) => q.x === p.x && (q.y > p.y || (q.y === p.y && o.i < s.i))));
        let y = Y(p.y) + (under ? 12 : -6);
        if (under && y > H - B - 3) y = Y(p.y) - 17;
        svg.append(sv("text", { x, y: Math.max(T + 8, y), class: "val s" + s.i,
          "text-anchor": x < L + 20 ? "start" : x > W - R - 20 ? "end" : "middle" }, +p.y.toPrecision(3)));
      }
  }
  // The legend, at the bottom right beside the x label: a swatch of each line and its name.
  if (named) {
    const width = series.reduce((w, s) => w + 6 * s.name.length + 26, 0);
    let x = W - R - width + 22;
    for (const s of series) {
      svg.append(sv("line", { x1: x - 18, x2: x - 4, y1: H - 5.5, y2: H - 5.5, class: "swatch s" + s.i }));
      svg.append(sv("text", { x, y: H - 2, class: "legend" }, s.name));
      x += 6 * s.name.length + 26;
    }
  }
}

// A run: summary, curves and revisions, live over server-sent events. A text-classification
// run (run.task) shows its F1 curves, the most confused label pairs of an evaluation, its
// best revision and test results; elements marked data-task show for their task only.
function showRun(id) {
  show("run");
  const steps = [], epochs = [];
  let run = null, full = null, bestSeq = null;
  const summary = $("#run-summary");
  const cancelBtn = $("#run-cancel"), cancelMsg = $("#run-cancel-msg");
  cancelMsg.textContent = "";
  summary.replaceChildren();
  $("#run-title").textContent = "Run " + id;
  $("#confusion-epoch").replaceChildren();
  $("#confusion-table tbody").replaceChildren();
  $("#cls-results").replaceChildren();

  function applyTask() {
    const task = (run && run.task) || "mlm", cls = isClassification(run);
    document.querySelectorAll("#view-run [data-task]").forEach((e) => (e.hidden = e.dataset.task !== task));
    $("#cap-eval-loss").textContent = cls ? "Loss per epoch (validation, training)" : "Validation loss";
    $("#cap-accuracy").textContent = cls ? "Validation accuracy" : "Masked-token accuracy";
  }
  const best = (k) => Math.max(...epochs.map((e) => e[k]).filter((x) => x != null && isFinite(x)));
  function renderSummary() {
    if (!run) return;
    applyTask();
    const cls = isClassification(run);
    $("#run-title").replaceChildren(document.createTextNode(run.name + " "), statusBadge(run.status),
      ...(run.task ? [" ", taskTag(run.task)] : []));
    const last = epochs[epochs.length - 1];
    const items = [
      ["Step", run.total_steps ? `${run.step} / ${run.total_steps}` : run.step],
      ["Epoch", run.epoch], ["Loss", fmtNum(run.loss)],
      ...(cls ? [["Best val. macro-F1", epochs.length ? fmtNum(best("eval_macro_f1")) : "–"],
                 ["Val. accuracy", fmtNum(last && last.eval_accuracy)]]
              : [["Best val. loss", fmtNum(run.best_eval_loss)]]),
      ["Tokens/s", run.tokens_per_s ? Math.round(run.tokens_per_s).toLocaleString() : "–"],
      ["ETA", run.status === "running" ? fmtDuration(run.eta_s) : "–"], ["Duration", fmtDuration(duration(run))],
      // A fine-tuning run's model is the one it started from.
      [cls ? "Base model" : "Model", run.model || "–"],
      // Runs stored before precisions existed have none in their config: they trained in fp32.
      ["Precision", run.config ? run.config.precision || "fp32" : "–"],
    ];
    if (run.task) items.unshift(["Task", TASKS[run.task] || run.task]);
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
    const perEpoch = (k) => epochs.map((e) => ({ x: e.epoch + 1, y: e[k] }));
    drawChart($("#chart-loss"), steps.map((s) => ({ x: s.step, y: s.loss })), "step");
    drawChart($("#chart-lr"), steps.map((s) => ({ x: s.step, y: s.lr })), "step");
    if (isClassification(run)) {
      drawChart($("#chart-eval-loss"), [{ name: "validation", pts: perEpoch("eval_loss") }, { name: "training", pts: perEpoch("train_loss") }],
                "epoch", { integerX: true });
      const share = { integerX: true, values: true, yMin: 0, yMax: 1 };
      drawChart($("#chart-accuracy"), perEpoch("eval_accuracy"), "epoch", share);
      drawChart($("#chart-f1"), [{ name: "macro", pts: perEpoch("eval_macro_f1") }, { name: "weighted", pts: perEpoch("eval_weighted_f1") }],
                "epoch", share);
      renderConfusion();
    } else {
      drawChart($("#chart-eval-loss"), perEpoch("eval_loss"), "epoch");
      drawChart($("#chart-accuracy"), perEpoch("eval_accuracy"), "epoch");
      drawChart($("#chart-perplexity"), perEpoch("perplexity"), "epoch");
    }
  }

  // The most confused pairs (top 10 off the diagonal) of the evaluation the select names:
  // the newest epoch unless one was picked, or the test set once it was scored.
  const confSel = $("#confusion-epoch");
  confSel.onchange = () => renderConfusion();
  function renderConfusion() {
    const test = full && full.results && full.results.test;
    const opts = [["latest", epochs.length ? `Latest epoch (${epochs[epochs.length - 1].epoch + 1}), validation` : "Latest epoch"],
                  ...epochs.map((e, i) => [String(i), `Epoch ${e.epoch + 1}, validation`])];
    if (test && Array.isArray(test.confusion)) opts.push(["test", "Test set, best revision"]);
    const keep = confSel.value || "latest";
    if (confSel.options.length !== opts.length)
      confSel.replaceChildren(...opts.map(([v, t]) => el("option", { value: v, text: t })));
    else opts.forEach(([, t], i) => (confSel.options[i].textContent = t));
    confSel.value = opts.some(([v]) => v === keep) ? keep : "latest";
    const v = confSel.value;
    const list = v === "test" ? test.confusion : (epochs[v === "latest" ? epochs.length - 1 : +v] || {}).confusion;
    const tbody = $("#confusion-table tbody"), note = $("#confusion-note");
    note.textContent = "";
    if (!Array.isArray(list) || !list.length) {
      const why = !epochs.length && v !== "test" ? "No evaluation yet." : !Array.isArray(list) ? "Not recorded for this evaluation."
        : "No confusion: every example was labelled right.";
      tbody.replaceChildren(el("tr", {}, el("td", { colspan: 4, class: "muted", text: why })));
      return;
    }
    const top = Math.max(...list.map((c) => c.count));
    tbody.replaceChildren(...list.map((c) => el("tr", {},
      el("td", { class: "label-name", text: c.true }), el("td", { class: "muted", "aria-hidden": "true", text: "→" }),
      el("td", { class: "label-name", text: c.pred }),
      el("td", { class: "count" }, el("span", { class: "count-bar", style: `width:${(3 * c.count / top).toFixed(2)}rem` }),
         document.createTextNode(String(c.count))))));
    note.textContent = `${list.length} pair${list.length > 1 ? "s" : ""}, most frequent first (at most 10 are recorded)`;
  }

  // The best revision (the server's pick by validation macro-F1) and the test set's scores.
  function renderResults() {
    const out = $("#cls-results"), name = run.name, res = full.results || {}, test = res.test;
    const seq = res.best_revision != null ? res.best_revision : bestSeq;
    const rev = (full.revisions || []).find((r) => r.seq === seq);
    const cards = [];
    if (seq != null) {
      const ref = name + "@best";
      const what = el("span", {}, el("code", { text: ref }), ` = ${name}@${seq}` + (rev ? ` (epoch ${rev.epoch}, ${rev.commit.slice(0, 8)})` : ""));
      cards.push(el("div", { class: "best-revision" }, el("b", { text: res.best_revision != null ? "Best revision" : "Best revision so far" }), what,
        el("span", { class: "links" },
          el("a", { href: "#/classify/" + encodeURIComponent(ref), text: "classify with it" }), " · ",
          el("a", { href: `/models/${encodeURIComponent(name)}/resolve/best/config.json`, text: "config.json" }))));
    } else {
      cards.push(el("div", {}, el("b", { text: "Best revision" }), el("span", { class: "muted", text: "none pushed yet" })));
    }
    if (test) {
      const kv = [["Accuracy", test.accuracy], ["Macro-F1", test.macro_f1], ["Weighted-F1", test.weighted_f1], ["Loss", test.loss],
                  ["Macro precision", test.macro_precision], ["Macro recall", test.macro_recall]];
      cards.push(el("div", { class: "test-results" }, el("b", { text: `Test set${test.examples ? ` (${test.examples} examples)` : ""}` }),
        el("table", { class: "kv compact", "aria-label": "Test results" }, el("tbody", {}, ...kv.filter(([, x]) => x != null).map(([k, x]) =>
          el("tr", {}, el("th", { scope: "row", text: k }), el("td", { text: fmtNum(x) })))))));
    } else {
      const why = !full.config || !full.config.test ? "no test file given" : run.status === "running" ? "scored when the run ends" : "not scored";
      cards.push(el("div", {}, el("b", { text: "Test set" }), el("span", { class: "muted", text: why })));
    }
    out.replaceChildren(...cards);
  }

  // The configuration: a fine-tuning run's task and base model first; lists and objects readable.
  function configValue(v) {
    if (Array.isArray(v) && v.every((x) => typeof x === "string")) {
      if (v.length <= 8) return document.createTextNode(v.join(", "));
      return el("details", {}, el("summary", { text: `${v.length}: ${v.slice(0, 3).join(", ")}, …` }), v.join(", "));
    }
    return document.createTextNode(v !== null && typeof v === "object" ? JSON.stringify(v) : String(v));
  }
  function renderDetails() {
    const cfg = full.config || {}, cls = isClassification(full);
    const first = cls ? ["task", "model", "base_revision"].filter((k) => k in cfg) : [];
    const names = { model: "model (base)" };
    const keys = [...first, ...Object.keys(cfg).filter((k) => !first.includes(k))];
    $("#config-table tbody").replaceChildren(...keys.map((k) =>
      el("tr", {}, el("td", { text: cls && names[k] ? names[k] : k }), el("td", {}, configValue(cfg[k])))));
    const revs = full.revisions || [];
    const seq = full.results && full.results.best_revision != null ? full.results.best_revision : bestSeq;
    $("#rev-table thead th:nth-child(5)").textContent = cls ? "Val. macro-F1" : "Val. loss";
    $("#rev-table tbody").replaceChildren(...(revs.length ? revs.map((r) => {
      const files = el("td");
      for (const f of ["config.json", "model.safetensors", "tokenizer.json"]) {
        files.append(el("a", { href: `/models/${encodeURIComponent(full.name)}/resolve/${r.commit}/${f}`, text: f }), " ");
      }
      const m = r.metrics || {};
      const msg = el("td", { text: r.message });
      if (cls && r.seq === seq) msg.append(" ", el("span", { class: "tag best", text: "best" }));
      return el("tr", cls && r.seq === seq ? { class: "best" } : {}, el("td", { text: r.seq }), el("td", { text: r.commit.slice(0, 10) }), msg,
                el("td", { text: r.step }), el("td", { text: fmtNum(cls ? m.eval_macro_f1 : m.eval_loss) }), files);
    }) : [el("tr", {}, el("td", { colspan: 6, class: "muted", text: "No revision pushed yet." }))]));
    if (cls) { renderResults(); renderConfusion(); }
  }
  async function loadDetails() {
    try {
      full = await api("GET", "/runs/" + encodeURIComponent(id));
      run = Object.assign(run || {}, full);
      // While a fine-tuning run is going, its repository names the best revision so far.
      if (isClassification(full) && !(full.results && full.results.best_revision != null) && (full.revisions || []).length) {
        try { bestSeq = (await api("GET", "/models/" + encodeURIComponent(full.name))).best; } catch (_) { bestSeq = null; }
      }
      renderSummary();
      renderDetails();
      renderCharts();
    } catch (e) { $("#run-title").textContent = "Run " + id + ": " + e.message; }
  }

  applyTask();
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
    renderSummary();
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
// its data folder: the API takes no host paths), prefilled from the newest job of the
// chosen task so a second run is one click. The task's fieldset is the only one enabled:
// the other's fields are neither checked nor sent.
function applyFormTask() {
  const f = $("#new-form"), cls = f.task.value === "text-classification";
  for (const [sel, on] of [["#mlm-fields", !cls], ["#cls-fields", cls]]) {
    const fs = $(sel);
    fs.hidden = !on;
    fs.disabled = !on;
  }
  f.querySelector("button[type=submit]").textContent = cls ? "Start fine-tuning" : "Start run";
}
$("#new-form").addEventListener("change", (ev) => { if (ev.target.name === "task") applyFormTask(); });

async function showNew() {
  show("new");
  const f = $("#new-form"), msg = $("#new-msg");
  msg.textContent = ""; msg.className = "msg";
  applyFormTask();
  if (!f.name.value) f.name.value = "run-" + new Date().toISOString().slice(0, 16).replace(/[-:T]/g, "");
  const m = $("#mlm-fields").elements, c = $("#cls-fields").elements;
  try {
    const [toks, sets, files, models] = await Promise.all(["/tokenizers", "/datasets", "/corpora", "/models"].map((p) => api("GET", p)));
    $("#known-tokenizers").replaceChildren(...toks.map((t) => el("option", { value: t.name })));
    $("#known-datasets").replaceChildren(...sets.map((d) => el("option", { value: d.name })));
    $("#known-files").replaceChildren(...files.map((d) => el("option", { value: d.name })));
    const keep = c.model.value;
    c.model.replaceChildren(...(models.length ? models.map((x) => el("option", { value: x.name,
      text: `${x.name} (${x.revisions} revision${x.revisions === 1 ? "" : "s"}${x.best != null ? ", a classifier" : ""})` }))
      : [el("option", { value: "", text: "no model in the store yet: train one first" })]));
    if (keep && models.some((x) => x.name === keep)) c.model.value = keep;
    const jobs = await api("GET", "/jobs");
    const last = jobs.find((j) => j.kind === "train" && j.params && j.params.tokenizer);
    if (last && !m.tokenizer.value)
      for (const k of ["tokenizer", "train", "validation"]) if (last.params[k]) m[k].value = last.params[k];
    const lastFt = jobs.find((j) => j.kind === "train" && j.params && j.params.task === "text-classification");
    if (lastFt && !c.train.value) {
      for (const k of ["train", "validation", "test", "text_column", "label_column", "labels", "max_length"])
        if (lastFt.params[k] != null) c[k].value = lastFt.params[k];
      if (models.some((x) => x.name === lastFt.params.model)) c.model.value = lastFt.params.model;
    }
  } catch (_) { /* the form works without suggestions */ }
}

// The description of the chosen task's run, as POST /runs takes it.
function runBody(f) {
  const body = { name: f.name.value };
  if (f.task.value === "text-classification") {
    const c = $("#cls-fields").elements;
    Object.assign(body, { task: "text-classification", model: c.model.value, train: c.train.value.trim() });
    for (const k of ["validation", "test", "labels", "text_column", "label_column"]) if (c[k].value.trim()) body[k] = c[k].value.trim();
    for (const k of ["epochs", "batch", "max_length", "seed", "threads"]) if (c[k].value !== "") body[k] = parseInt(c[k].value, 10);
    if (c.lr.value !== "") body.lr = parseFloat(c.lr.value);
    return body;
  }
  const m = $("#mlm-fields").elements;
  Object.assign(body, { tokenizer: m.tokenizer.value, train: m.train.value, config: m.config.value });
  if (m.validation.value) body.validation = m.validation.value;
  for (const k of ["epochs", "max_steps", "batch", "warmup_steps", "seed", "threads"]) body[k] = parseInt(m[k].value, 10);
  body.lr = parseFloat(m.lr.value);
  body.precision = m.precision.value;
  return body;
}
$("#new-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = ev.target, msg = $("#new-msg"), btn = f.querySelector("button[type=submit]");
  f.querySelectorAll("[aria-invalid]").forEach((x) => { x.removeAttribute("aria-invalid"); x.removeAttribute("aria-describedby"); });
  const body = runBody(f);
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
  } catch (e) {
    msg.className = "msg error"; msg.textContent = e.message;
    // A refusal that names a field (422 {"detail": {"field": ...}}) marks it in the shown fieldset.
    const field = e.detail && typeof e.detail.field === "string" ? e.detail.field : null;
    const fs = f.task.value === "text-classification" ? $("#cls-fields") : $("#mlm-fields");
    const input = field && (fs.elements[field] || f.elements[field]);
    if (input && input.setAttribute) { input.setAttribute("aria-invalid", "true"); input.setAttribute("aria-describedby", "new-msg"); input.focus(); }
  }
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
// #/classify/NAME@REV picks that model (a run page links its NAME@best).
async function showClassify(want) {
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
    if (want && !opts.some((o) => o.value === want)) opts.unshift(el("option", { value: want, text: want }));
    const keep = want || sel.value;
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
