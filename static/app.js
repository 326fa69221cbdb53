// maskd's page: run history, a run's curves, the data pipeline (upload a corpus, train a
// tokenizer, prepare datasets), a form to start a run, a fill-mask playground and a
// text-classification one. Plain DOM over the HTTP API; text always goes in with textContent.
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
    // (A detail that only names the field adds nothing: the form marks that field.)
    const onlyField = data && data.detail && typeof data.detail === "object" && Object.keys(data.detail).join() === "field";
    const d = data && data.detail != null && !onlyField ? ": " + (typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail)) : "";
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
    // What was shown was refused (401): the view loads again, its event stream too.
    route();
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
  if (h === "/data") return showData();
  if ((m = h.match(/^\/playground(?:\/(.+))?$/))) return showPlayground(m[1] && decodeURIComponent(m[1]));
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
      // The cells that change, by column after the name's.
      const cells = (r) => [statusBadge(r.status), r.model || "–", r.total_steps ? `${r.step} / ${r.total_steps}` : String(r.step || 0),
                            fmtNum(r.best_eval_loss), fmtDuration(duration(r)), fmtTime(r.started)];
      const rows = [...tbody.rows];
      if (rows.length === runs.length && runs.every((r, i) => rows[i].dataset.run === String(r.id))) {
        // The same runs in the same order: their cells are updated in place, so the link a
        // keyboard user has reached keeps its focus (rebuilt every 2 s, it lost it to the body).
        runs.forEach((r, i) => cells(r).forEach((v, k) => {
          const td = rows[i].cells[k + 1];
          if (typeof v === "string") { if (td.textContent !== v) td.textContent = v; }
          else if (td.textContent !== v.textContent) td.replaceChildren(v);
        }));
      } else {
        tbody.replaceChildren(...runs.map((r) => {
          const tr = el("tr", { "data-run": r.id },
            el("td", {}, el("a", { href: "#/runs/" + r.id, text: r.name, title: r.name }), ...(r.task ? [" ", taskTag(r.task)] : [])),
            ...cells(r).map((v) => (typeof v === "string" ? el("td", { text: v }) : el("td", {}, v))));
          tr.addEventListener("click", (e) => { if (e.target.tagName !== "A") location.hash = "#/runs/" + r.id; });
          return tr;
        }));
      }
      status.textContent = runs.length ? `${runs.length} run${runs.length > 1 ? "s" : ""} · updates live` :
        "No runs yet: prepare a dataset in “Data”, then start one from “New run”.";
    } catch (e) { status.textContent = "Cannot load runs: " + e.message; }
  }
  refresh();
  const t = setInterval(refresh, 2000);
  cleanup.push(() => clearInterval(t));
}

// ---- the data pipeline: corpus, tokenizer, dataset ----
// Names the server takes for what it stores: letters, digits, - _ . (not first), at most 64.
const cleanName = (s) => String(s).replace(/[^A-Za-z0-9._-]+/g, "-").replace(/\.{2,}/g, ".").replace(/^[.-]+/, "").slice(0, 64);
// A corpus's name as a stem for the names made from it: wikitext-2/train.txt -> wikitext-2-train.
const corpusStem = (name) => cleanName(String(name).replace(/\.(txt|text|raw|tokens|csv|jsonl?)$/i, "").replace(/\//g, "-")).slice(0, 50) || "corpus";
function fmtBytes(n) {
  if (n == null || !isFinite(n)) return "–";
  const u = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (Math.abs(n) >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0) : String(Math.round(n))) + " " + u[i];
}
const fmtAmount = (n, unit) => (n == null || !isFinite(n) ? "–" : unit === "bytes" ? fmtBytes(n) : Math.round(n).toLocaleString() + (unit ? " " + unit : ""));
// A hash shortened, the whole of it in the tooltip.
const shortHash = (h) => (h ? el("code", { class: "hash", title: h, text: String(h).slice(0, 12) }) : document.createTextNode("–"));
const cellOf = (x) => (x instanceof Node ? x : document.createTextNode(x == null || x === "" ? "–" : String(x)));
function setMsg(m, text, kind) { m.className = "msg" + (kind ? " " + kind : ""); m.textContent = text; }
function setBar(box, frac) {
  box.hidden = false;
  const pct = frac == null ? 0 : Math.max(0, Math.min(100, 100 * frac));
  box.querySelector(".bar").style.width = pct.toFixed(1) + "%";
  if (frac == null) box.removeAttribute("aria-valuenow"); else box.setAttribute("aria-valuenow", pct.toFixed(0));
}

// What the Data view made this session, so the next step (and the run form) picks it.
const made = { corpus: null, tokenizer: null, train: null, validation: null };
const lists = { corpora: [], tokenizers: [], datasets: [] };
const pending = { corpus: null, tokenizer: null };  // picked once by the next render of the lists
const jobWatch = {};  // form id -> the job it watches
const df = () => $("#ds-form");

// A job's row: status, phase, done / total with a bar, rate and ETA; polled about once a
// second until it ends (even while another view is shown), then onEnd(job), which puts
// what became of it (the job's error when it failed) in its step's status line.
function watchJob(box, id, onEnd) {
  const key = box.id;
  jobWatch[key] = id;
  const status = el("span"), text = el("span", { class: "job-text" }), err = el("p", { class: "msg error" });
  const bar = el("div", { class: "progress", role: "progressbar", "aria-label": `Job ${id} progress`, "aria-valuemin": "0", "aria-valuemax": "100" },
                 el("div", { class: "bar" }));
  const cancel = el("button", { type: "button", class: "danger small", text: "Cancel" });
  box.replaceChildren(el("div", { class: "job-head" }, el("b", { text: `Job ${id}` }), " ", status, " ", text, " ", cancel), bar, err);
  box.hidden = false;
  box.dataset.job = id;
  delete box.dataset.status;
  delete box.dataset.progressSeen;
  cancel.onclick = async () => {
    cancel.disabled = true;
    try { await api("POST", `/jobs/${id}/cancel`); } catch (e) { err.textContent = e.message; }
  };
  let fails = 0, polls = 0;
  async function poll() {
    if (jobWatch[key] !== id) return;  // a newer job took the row
    let j;
    try { j = await api("GET", "/jobs/" + id); fails = 0; } catch (e) {
      err.textContent = "Cannot read the job: " + e.message;
      if (++fails < 30) setTimeout(poll, 2000);
      return;
    }
    err.textContent = "";
    box.dataset.status = j.status;
    status.replaceChildren(statusBadge(j.status));
    const p = j.progress;
    const parts = [];
    if (p) {
      if (p.phase) parts.push(p.phase);
      // "3.2 MB / 10.8 MB", "400 / 1,000 pieces"
      if (p.done != null) parts.push(p.total ? `${p.unit === "bytes" ? fmtBytes(p.done) : fmtAmount(p.done)} / ${fmtAmount(p.total, p.unit)} (${Math.min(100, 100 * p.done / p.total).toFixed(0)}%)`
                                             : fmtAmount(p.done, p.unit));
      if (p.rate) parts.push((p.unit === "bytes" ? fmtBytes(p.rate) : fmtAmount(p.rate, p.unit)) + "/s");
      if (p.eta_s != null && j.status === "running") parts.push("ETA " + fmtDuration(p.eta_s));
      box.dataset.progressSeen = "1";
    }
    if (j.status === "done" && j.started && j.finished) {
      const d = j.finished - j.started;
      parts.push("took " + (d < 10 ? d.toFixed(1) + "s" : fmtDuration(d)));
    }
    text.textContent = parts.join(" · ");
    const live = j.status === "queued" || j.status === "running";
    setBar(bar, j.status === "done" ? 1 : p && p.total ? p.done / p.total : live ? null : 0);
    cancel.hidden = !live;
    // Quicker at first: a small job ends within a second or two.
    if (live) setTimeout(poll, ++polls < 5 ? 400 : 1000);
    else if (onEnd) onEnd(j);
  }
  poll();
}

function fillSelect(sel, items, { empty, none, keep, prefer } = {}) {
  const opts = items.map((x) => el("option", { value: x.value, text: x.text || x.value }));
  if (none) opts.unshift(el("option", { value: "", text: none }));
  if (!opts.length) opts.push(el("option", { value: "", text: empty || "none yet" }));
  const want = [prefer, keep].find((v) => v != null && opts.some((o) => o.value === v));
  sel.replaceChildren(...opts);
  if (want != null) sel.value = want;
}

function renderCorpora() {
  $("#corpora-table tbody").replaceChildren(...(lists.corpora.length ? lists.corpora.map((c) => el("tr", {},
    el("td", { text: c.name }), el("td", { text: fmtBytes(c.bytes), title: c.bytes != null ? c.bytes + " bytes" : "" }),
    el("td", { text: c.uploaded ? "uploaded" : c.uploaded === false ? "data folder" : "–" })))
    : [el("tr", {}, el("td", { colspan: 3, class: "muted", text: "No corpus yet: upload one." }))]));
  // Checkboxes keep what was ticked; the corpus just uploaded is ticked.
  const list = $("#tok-corpora .check-list");
  // (An upload ticks its corpus alone, and picks it for a dataset: once, pending.corpus.)
  const fresh = pending.corpus;
  pending.corpus = null;
  const ticked = fresh ? new Set([fresh]) : new Set([...list.querySelectorAll("input:checked")].map((i) => i.value));
  list.replaceChildren(...(lists.corpora.length ? lists.corpora.map((c) => {
    const box = el("input", { type: "checkbox", name: "input", value: c.name });
    box.checked = ticked.has(c.name);
    return el("label", { class: "choice" }, box, ` ${c.name} `, el("span", { class: "muted", text: fmtBytes(c.bytes) }));
  }) : [el("p", { class: "muted", text: "No corpus yet: upload one above." })]));
  const ds = $("#ds-form");
  fillSelect(ds.input, lists.corpora.map((c) => ({ value: c.name })), { empty: "no corpus yet", keep: ds.input.value, prefer: fresh });
}
function renderTokenizers() {
  $("#tokenizers-table tbody").replaceChildren(...(lists.tokenizers.length ? lists.tokenizers.map((t) => {
    const src = t.source && Array.isArray(t.source.corpora) ? t.source.corpora : null;
    const from = el("td");
    if (src && src.length) src.forEach((c, i) => from.append(...(i ? [", "] : []), `${c.name} `, shortHash(c.sha256)));
    else from.textContent = "–";
    return el("tr", { "data-name": t.name }, el("td", { text: t.name }), el("td", { text: t.vocab_size != null ? Number(t.vocab_size).toLocaleString() : "–" }),
              from, el("td", {}, shortHash(t.sha256)), el("td", { text: fmtTime(t.created) }));
  }) : [el("tr", {}, el("td", { colspan: 5, class: "muted", text: "No tokenizer yet: train one." }))]));
  const ds = $("#ds-form");
  fillSelect(ds.tokenizer, lists.tokenizers.map((t) => ({ value: t.name, text: t.vocab_size ? `${t.name} (${t.vocab_size})` : t.name })),
             { empty: "no tokenizer yet: train one", keep: ds.tokenizer.value, prefer: pending.tokenizer });
  pending.tokenizer = null;
}
function renderDatasets() {
  $("#datasets-table tbody").replaceChildren(...(lists.datasets.length ? lists.datasets.map((d) => el("tr", { "data-name": d.name },
    el("td", { text: d.name }), el("td", {}, cellOf(d.tokenizer || (d.source && d.source.tokenizer && d.source.tokenizer.name))),
    el("td", {}, cellOf(d.split)), el("td", {}, cellOf(d.seq_len)),
    el("td", { text: d.samples != null ? Number(d.samples).toLocaleString() : "–" }), el("td", { text: fmtTime(d.created) })))
    : [el("tr", {}, el("td", { colspan: 6, class: "muted", text: "No dataset yet: prepare one." }))]));
}
async function loadData(which = ["corpora", "tokenizers", "datasets"]) {
  const st = $("#data-status");
  try {
    const got = await Promise.all(which.map((k) => api("GET", "/" + k)));
    which.forEach((k, i) => (lists[k] = Array.isArray(got[i]) ? got[i] : []));
    if (which.includes("corpora")) renderCorpora();
    if (which.includes("tokenizers")) renderTokenizers();
    if (which.includes("datasets")) renderDatasets();
    st.textContent = "";
  } catch (e) { setMsg(st, "Cannot load the lists: " + e.message, "error"); }
  suggestNames();
}

// Suggested names, until the field is typed into: "<corpus>-tok", "<corpus>-<split>".
function suggest(input, value) {
  if (!input.value || input.value === input.dataset.suggested) { input.value = value; input.dataset.suggested = value; }
}
function suggestNames() {
  const tf = $("#tok-form"), dsf = $("#ds-form");
  const first = tf.querySelector("#tok-corpora input:checked");
  if (first) suggest(tf.name, corpusStem(first.value) + "-tok");
  if (dsf.input.value) suggest(dsf.name, corpusStem(dsf.input.value) + "-" + (cleanName(dsf.split.value) || "data"));
}
$("#tok-form").addEventListener("change", suggestNames);
$("#ds-form").addEventListener("change", (ev) => {
  // A corpus named like a validation or test file suggests that split.
  if (ev.target.name === "input" && (!df().split.value || df().split.value === df().split.dataset.suggested)) {
    const v = /valid|dev/i.test(ev.target.value) ? "validation" : /test/i.test(ev.target.value) ? "test" : "train";
    df().split.value = v; df().split.dataset.suggested = v;
  }
  suggestNames();
});
$("#ds-form").split.addEventListener("input", suggestNames);
$("#ds-form").split.dataset.suggested = $("#ds-form").split.value;  // the page's "train" gives way to a guess

function showData() {
  show("data");
  loadData();
  // A tokenizer or prepare job still going (started before a reload) gets its row back.
  api("GET", "/jobs").then((jobs) => {
    for (const [kind, box, done] of [["tokenizer", "#tok-job", tokenizerDone], ["prepare", "#ds-job", datasetDone]]) {
      const j = (jobs || []).find((x) => x.kind === kind);
      // Unless the row already follows a job still going (a row whose job ended takes the new one).
      const going = (s) => s === "queued" || s === "running";
      if (j && going(j.status) && jobWatch[$(box).id] !== j.id && !going($(box).dataset.status)) watchJob($(box), j.id, done);
    }
  }).catch(() => { /* the forms work without it */ });
}

// 1. Upload: XMLHttpRequest, whose upload events give the bar (fetch has none).
$("#upload-form").file.addEventListener("change", (ev) => {
  const f = ev.target.files[0], name = $("#upload-form").name;
  if (f) suggest(name, cleanName(f.name) || "corpus");
});
$("#upload-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const f = ev.target, file = f.file.files[0], msg = $("#upload-msg"), bar = $("#upload-progress"), out = $("#upload-result");
  const btn = f.querySelector("button[type=submit]");
  if (!file) { setMsg(msg, "Choose a file first.", "error"); return; }
  const name = f.name.value.trim() || cleanName(file.name);
  if (!name) { setMsg(msg, "Give the corpus a name (letters, digits, - _ .).", "error"); f.name.focus(); return; }
  out.hidden = true;
  btn.disabled = true;
  setBar(bar, 0);
  setMsg(msg, `Uploading ${fmtBytes(file.size)}…`);
  const xhr = new XMLHttpRequest();
  xhr.open("POST", "/corpora?name=" + encodeURIComponent(name));
  xhr.setRequestHeader("Content-Type", "application/octet-stream");
  xhr.upload.onprogress = (e) => {
    const total = e.lengthComputable ? e.total : file.size;
    setBar(bar, total ? e.loaded / total : null);
    setMsg(msg, `Uploading: ${fmtBytes(e.loaded)} of ${fmtBytes(total)} (${total ? Math.floor(100 * e.loaded / total) : 0}%)`);
  };
  // The body sent: the server checks it (UTF-8 text, sha256) before it answers.
  xhr.upload.onload = () => { setBar(bar, 1); setMsg(msg, `Sent ${fmtBytes(file.size)}; the server is checking it…`); };
  xhr.onerror = () => {
    btn.disabled = false;
    setMsg(msg, "Upload failed: the connection closed (is the file larger than the server takes?)", "error");
  };
  xhr.onload = () => {
    btn.disabled = false;
    let d = null;
    try { d = xhr.responseText ? JSON.parse(xhr.responseText) : null; } catch (_) { d = { error: xhr.responseText }; }
    if (xhr.status === 401) showLogin();
    if (xhr.status !== 201 && xhr.status !== 200) {
      const detail = !d || d.detail == null ? "" : typeof d.detail === "string" ? ": " + d.detail
        : d.detail.max_bytes != null ? `: this server takes at most ${fmtBytes(d.detail.max_bytes)}` : ": " + JSON.stringify(d.detail);
      setMsg(msg, `${xhr.status} ${(d && d.error) || xhr.statusText}${detail}`, "error");
      return;
    }
    setBar(bar, 1);
    setMsg(msg, `Uploaded ${d.name}.`, "ok");
    out.replaceChildren(...[["Name", document.createTextNode(d.name)], ["Size", document.createTextNode(`${fmtBytes(d.bytes)} (${Number(d.bytes).toLocaleString()} bytes)`)],
                            ["sha256", shortHash(d.sha256)]].map(([k, v]) => el("div", {}, el("b", { text: k }), el("span", {}, v))));
    out.hidden = false;
    made.corpus = pending.corpus = d.name;
    f.name.value = ""; delete f.name.dataset.suggested;
    loadData(["corpora"]).then(() => { const c = df().input; c.dispatchEvent(new Event("change", { bubbles: true })); });
  };
  xhr.send(file);
});

// 2. A tokenizer job.
// A job that did not end well says why in its step's status line.
const jobFailed = (j) => `Job ${j.id} ${j.status}${j.error ? ": " + j.error : ""}`;
function tokenizerDone(j) {
  if (j.status === "done") {
    made.tokenizer = pending.tokenizer = j.params && j.params.name;
    setMsg($("#tok-msg"), `Tokenizer ${made.tokenizer || ""} is ready: prepare a dataset with it below.`, "ok");
  } else setMsg($("#tok-msg"), jobFailed(j), "error");
  loadData(["tokenizers"]);
}
$("#tok-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = ev.target, msg = $("#tok-msg"), btn = f.querySelector("button[type=submit]");
  const input = [...f.querySelectorAll("#tok-corpora input:checked")].map((i) => i.value);
  if (!input.length) { setMsg(msg, "Tick at least one corpus.", "error"); return; }
  btn.disabled = true;
  setMsg(msg, "Submitting…");
  try {
    const job = await api("POST", "/tokenizers", { name: f.name.value.trim(), input: input.length > 1 ? input : input[0],
                                                   vocab_size: parseInt(f.vocab_size.value, 10) });
    setMsg(msg, `Training tokenizer ${f.name.value.trim()} (job ${job.id})…`);
    watchJob($("#tok-job"), job.id, tokenizerDone);
  } catch (e) { setMsg(msg, e.message, "error"); }
  btn.disabled = false;
});

// 3. A prepare job.
function datasetDone(j) {
  const p = j.params || {};
  if (j.status === "done") {
    const split = p.split || "train";
    if (split === "train" || split === "validation") made[split] = p.name;
    setMsg($("#ds-msg"), `Dataset ${p.name || ""} is ready` + (split === "train" || split === "validation" ? `: start a run with it from “New run”.` : "."), "ok");
  } else setMsg($("#ds-msg"), jobFailed(j), "error");
  loadData(["datasets"]);
}
$("#ds-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const f = ev.target, msg = $("#ds-msg"), btn = f.querySelector("button[type=submit]");
  const body = { name: f.name.value.trim(), tokenizer: f.tokenizer.value, input: f.input.value };
  if (f.split.value.trim()) body.split = f.split.value.trim();
  if (f.seq_len.value !== "") body.seq_len = parseInt(f.seq_len.value, 10);
  btn.disabled = true;
  setMsg(msg, "Submitting…");
  try {
    const job = await api("POST", "/datasets", body);
    setMsg(msg, `Preparing dataset ${body.name} (job ${job.id})…`);
    watchJob($("#ds-job"), job.id, datasetDone);
  } catch (e) { setMsg(msg, e.message, "error"); }
  btn.disabled = false;
});

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
// The least and the greatest of xs by a loop: Math.min(...xs) passes one argument per
// value, and past about 125,000 (a run's steps) throws "Maximum call stack size exceeded".
function extent(xs) {
  let lo = Infinity, hi = -Infinity;
  for (const x of xs) { if (x < lo) lo = x; if (x > hi) hi = x; }
  return [lo, hi];
}
// At most about 2n points of a line, in order: each of n runs of points keeps its lowest
// and its highest, so the line's peaks survive where a chart 320 units wide draws them.
function thin(pts, n) {
  if (pts.length <= 2 * n) return pts;
  const out = [], size = Math.ceil(pts.length / n);
  for (let i = 0; i < pts.length; i += size) {
    let lo = pts[i], hi = pts[i];
    for (let j = i + 1; j < Math.min(i + size, pts.length); j++) {
      if (pts[j].y < lo.y) lo = pts[j];
      if (pts[j].y > hi.y) hi = pts[j];
    }
    if (lo === hi) out.push(lo);
    else out.push(...(lo.x <= hi.x ? [lo, hi] : [hi, lo]));
  }
  return out;
}
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
  let [x0, x1] = extent(all.map((p) => p.x)), [y0, y1] = extent(all.map((p) => p.y));
  if (opts.yMin != null) y0 = Math.min(y0, opts.yMin);
  if (opts.yMax != null) y1 = Math.max(y1, opts.yMax);
  if (x0 === x1) { x0 -= 1; x1 += 1; }
  if (y0 === y1) { const d = Math.abs(y0) * 0.05 || 1; y0 -= d; y1 += d; }
  const yt = niceTicks(y0, y1, 4);
  y0 = Math.min(y0, yt[0]); y1 = Math.max(y1, yt[yt.length - 1]);
  const X = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const Y = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);
  // Three digits, or as many more as it takes for every tick to read as its value (2.5e-4
  // read "3e-4", 102.5 "103") and no two the same.
  let digits = 3, fmt;
  const tol = Math.abs(yt.length > 1 ? yt[1] - yt[0] : yt[0] || 1) * 1e-6;
  do {
    fmt = yt.map((t) => String(Math.abs(t) < 1e-3 && t ? t.toExponential(digits - 3) : +t.toPrecision(digits)));
  } while ((new Set(fmt).size < fmt.length || fmt.some((f, i) => Math.abs(+f - yt[i]) > tol)) && ++digits < 9);
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
    svg.append(sv("polyline", { class: "s" + s.i, points: thin(s.pts, 640).map((p) => `${X(p.x).toFixed(1)},${Y(p.y).toFixed(1)}`).join(" ") }));
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
  // Left for another view: answers still on their way are dropped (a slow server's answer
  // for this run drew it over the next run's page).
  let gone = false;
  cleanup.push(() => { gone = true; });
  const summary = $("#run-summary");
  const cancelBtn = $("#run-cancel"), resumeBtn = $("#run-resume"), cancelMsg = $("#run-cancel-msg");
  cancelMsg.textContent = "";
  cancelBtn.disabled = resumeBtn.disabled = false;   /* (the buttons are every run's: another's cancel left them off) */
  $("#run-try").hidden = true;
  summary.replaceChildren();
  $("#run-title").textContent = "Run " + id;
  $("#confusion-epoch").replaceChildren();
  $("#confusion-table tbody").replaceChildren();
  $("#cls-results").replaceChildren();
  // The last run's configuration and revisions go too: the title, charts and confusion come
  // from the event stream, often before this run's details, and stood beside another run's table.
  $("#config-table tbody").replaceChildren();
  $("#rev-table tbody").replaceChildren();

  function applyTask() {
    const task = (run && run.task) || "mlm", cls = isClassification(run);
    document.querySelectorAll("#view-run [data-task]").forEach((e) => (e.hidden = e.dataset.task !== task));
    $("#cap-eval-loss").textContent = cls ? "Loss per epoch (validation, training)" : "Validation loss";
    $("#cap-accuracy").textContent = cls ? "Validation accuracy" : "Masked-token accuracy";
  }
  const best = (k) => extent(epochs.map((e) => e[k]).filter((x) => x != null && isFinite(x)))[1];
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
    setBar($("#run-progress"), run.total_steps ? run.step / run.total_steps : null);
    cancelBtn.hidden = run.status !== "running";
    // A masked-LM run that stopped before its end continues from its newest checkpoint
    // (POST /runs {"resume"}); a fine-tuning run is submitted again instead.
    resumeBtn.hidden = !["interrupted", "cancelled", "failed"].includes(run.status) || isClassification(run);
  }
  // A masked-LM run's model answers in the fill-mask playground once a revision is pushed:
  // this run's newest revision, by its commit (the repository's newest may be another
  // run's, trained into the same name later).
  function renderTry() {
    const revs = (full && full.revisions) || [];   // newest first
    const on = !!full && !isClassification(full) && revs.length > 0;
    $("#run-try").hidden = !on;
    if (!on) return;
    $("#run-try-link").href = "#/playground/" + encodeURIComponent(`${full.name}@${revs[0].commit}`);
    $("#run-try-note").textContent = run.status === "running" ? `its newest revision (${revs.length} so far)` : "";
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
    const top = extent(list.map((c) => c.count))[1];
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
      // "So far" only while the run goes on: a finished run without a test file stores no results.
      const settled = res.best_revision != null || run.status !== "running";
      cards.push(el("div", { class: "best-revision" }, el("b", { text: settled ? "Best revision" : "Best revision so far" }), what,
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
      const got = await api("GET", "/runs/" + encodeURIComponent(id));
      if (gone) return;
      full = got;
      run = Object.assign(run || {}, full);
      // While a fine-tuning run is going, its repository names the best revision so far.
      if (isClassification(full) && !(full.results && full.results.best_revision != null) && (full.revisions || []).length) {
        try { bestSeq = (await api("GET", "/models/" + encodeURIComponent(full.name))).best; } catch (_) { bestSeq = null; }
        if (gone) return;
      }
      renderSummary();
      renderDetails();
      renderTry();
      renderCharts();
    } catch (e) { if (!gone) $("#run-title").textContent = "Run " + id + ": " + e.message; }
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
    // A stream opened again (EventSource reconnects by itself, after a server restart)
    // starts from the run's first step: what is held already is not drawn twice.
    for (const x of m.steps) if (!steps.length || x.step > steps[steps.length - 1].step) steps.push(x);
    for (const x of m.epochs) if (!epochs.length || x.epoch > epochs[epochs.length - 1].epoch) epochs.push(x);
    renderCharts();
    renderSummary();
  });
  es.addEventListener("end", () => { es.close(); loadDetails(); });
  // A stream the browser gave up on (refused: 429 past --max-streams-per-ip, 401; the
  // server gone) is said: the page otherwise looks live while nothing moves.
  es.onerror = () => {
    if (es.readyState === EventSource.CLOSED && !gone)
      cancelMsg.textContent = "Live updates stopped (the server refused or closed the event stream): reload the page to follow the run.";
  };
  cleanup.push(() => es.close());
  const t = setInterval(() => run && run.status === "running" && renderSummary(), 1000);
  cleanup.push(() => clearInterval(t));

  // Resume: the job is queued; the page follows the run again once it runs (its event
  // stream ended with the run), or says how the job ended.
  resumeBtn.onclick = async () => {
    resumeBtn.disabled = true;
    try {
      const job = await api("POST", "/runs", { resume: String(id) });
      cancelMsg.textContent = `Resume queued as job ${job.id}: this page follows the run when it starts.`;
      for (;;) {
        await new Promise((r) => setTimeout(r, 1000));
        if (gone) return;
        const [r, j] = await Promise.all([api("GET", "/runs/" + encodeURIComponent(id)), api("GET", "/jobs/" + job.id)]);
        if (gone) return;
        if (r.status === "running" || r.status === "done") { route(); return; }
        if (["failed", "cancelled", "interrupted"].includes(j.status)) {
          cancelMsg.textContent = `The resume job ${j.status}${j.error ? ": " + j.error : ""}.`;
          break;
        }
      }
    } catch (e) { if (!gone) cancelMsg.textContent = e.message; }
    resumeBtn.disabled = false;
  };
  cancelBtn.onclick = async () => {
    cancelBtn.disabled = true;
    try {
      const r = await api("POST", "/runs/" + encodeURIComponent(id) + "/cancel");
      cancelMsg.textContent = "Cancelling: the run stops after saving a checkpoint (" + r.status + ").";
      return;   // accepted: the button stays off (a second press only said 409)
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

// The masked-LM fields pick a registered tokenizer and datasets (GET /tokenizers,
// /datasets, refreshed when the view opens); "a path…" shows a text field for one
// inside the server's data folder instead.
const PATH_PICK = "\u2026path";
const madeSeen = {};
function pickChanged(sel) {
  const path = sel.closest(".pick").querySelector("input");
  const on = sel.selectedOptions[0] && sel.selectedOptions[0].dataset.path === "1";
  path.closest("label").hidden = !on;
  path.disabled = !on;
}
// The value a pick stands for: the option's, or the path typed.
function pickValue(sel) {
  const o = sel.selectedOptions[0];
  return o && o.dataset.path === "1" ? sel.closest(".pick").querySelector("input").value.trim() : sel.value;
}
// Selects want: the first of wants that it has; a name it does not list (a path in the
// data folder, from the last job) becomes an option of its own.
function fillPick(sel, items, { none, empty, wants = [] }) {
  const names = items.map((x) => x.value);
  const opts = items.map((x) => el("option", { value: x.value, text: x.text || x.value }));
  if (none) opts.unshift(el("option", { value: "", text: none }));
  else if (!names.length) opts.unshift(el("option", { value: "", text: empty }));
  opts.push(el("option", { value: PATH_PICK, text: "a path inside the data folder…", "data-path": "1" }));
  const want = wants.find((w) => w != null && (w !== "" || none));
  if (want && !names.includes(want) && want !== PATH_PICK)
    opts.splice(opts.length - 1, 0, el("option", { value: want, text: `${want} (in the data folder)` }));
  sel.replaceChildren(...opts);
  if (want != null) sel.value = want;
  pickChanged(sel);
}
$("#mlm-fields").addEventListener("change", (ev) => { if (ev.target.closest(".pick") && ev.target.tagName === "SELECT") pickChanged(ev.target); });

async function showNew() {
  show("new");
  const f = $("#new-form"), msg = $("#new-msg");
  msg.textContent = ""; msg.className = "msg";
  applyFormTask();
  if (!f.name.value) f.name.value = "run-" + new Date().toISOString().slice(0, 16).replace(/[-:T]/g, "");
  const m = $("#mlm-fields").elements, c = $("#cls-fields").elements;
  try {
    const [toks, sets, files, models, jobs] = await Promise.all(["/tokenizers", "/datasets", "/corpora", "/models", "/jobs"].map((p) => api("GET", p)));
    $("#known-files").replaceChildren(...files.map((d) => el("option", { value: d.name })));
    // What was picked stays picked; else what the Data view just made; else the newest job's.
    const last = jobs.find((j) => j.kind === "train" && j.params && j.params.tokenizer);
    const lp = (last && last.params) || {};
    // (Validation's "" is its "none"; the others' "" says there was nothing to pick.)
    const kept = (k) => (m[k].options.length && m[k].value !== PATH_PICK && (m[k].value || k === "validation") ? m[k].value : null);
    // Options say what is known of each: a vocabulary, a split, a length, a sample count.
    const tokItems = toks.map((t) => ({ value: t.name, text: t.vocab_size ? `${t.name} (vocabulary ${t.vocab_size})` : t.name }));
    const setItems = sets.map((d) => {
      const what = [d.split, d.seq_len && `${d.seq_len} tokens`, d.samples != null && `${Number(d.samples).toLocaleString()} samples`,
                    d.tokenizer && `tokenizer ${d.tokenizer}`].filter(Boolean);
      return { value: d.name, text: what.length ? `${d.name} (${what.join(", ")})` : d.name };
    });
    // Something the Data view made since the form was last filled comes first.
    const fresh = (k) => (made[k] && made[k] !== madeSeen[k] ? made[k] : null);
    fillPick(m.tokenizer, tokItems, { empty: "no tokenizer yet: train one in Data", wants: [fresh("tokenizer"), kept("tokenizer"), lp.tokenizer] });
    fillPick(m.train, setItems, { empty: "no dataset yet: prepare one in Data", wants: [fresh("train"), kept("train"), lp.train] });
    fillPick(m.validation, setItems, { none: "none", wants: [fresh("validation"), kept("validation"), lp.validation] });
    // A validation set cut by another registered tokenizer than the chosen one fails the run
    // (an older job's, beside a tokenizer just made in Data): one cut by the chosen tokenizer
    // instead, else none.
    const tokName = pickValue(m.tokenizer), val = sets.find((d) => d.name === pickValue(m.validation));
    if (val && val.tokenizer && toks.some((t) => t.name === tokName) && val.tokenizer !== tokName) {
      const same = sets.filter((d) => d.tokenizer === tokName && d.split && d.split !== "train").pop();
      m.validation.value = same ? same.name : "";
    }
    Object.assign(madeSeen, made);
    const keep = c.model.value;
    c.model.replaceChildren(...(models.length ? models.map((x) => el("option", { value: x.name,
      text: `${x.name} (${x.revisions} revision${x.revisions === 1 ? "" : "s"}${x.best != null ? ", a classifier" : ""})` }))
      : [el("option", { value: "", text: "no model in the store yet: train one first" })]));
    if (keep && models.some((x) => x.name === keep)) c.model.value = keep;
    const lastFt = jobs.find((j) => j.kind === "train" && j.params && j.params.task === "text-classification");
    if (lastFt && !c.train.value) {
      for (const k of ["train", "validation", "test", "text_column", "label_column", "labels", "max_length"])
        if (lastFt.params[k] != null) c[k].value = lastFt.params[k];
      if (models.some((x) => x.name === lastFt.params.model)) c.model.value = lastFt.params.model;
    }
  } catch (e) { setMsg(msg, "Cannot list tokenizers and datasets: " + e.message, "error"); }
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
    // "More options": what is left empty is the server's default, so it is not sent.
    for (const k of ["warmup_ratio", "weight_decay", "label_smoothing", "clip_norm", "hidden_dropout_prob",
                     "attention_probs_dropout_prob", "classifier_dropout", "validation_fraction"])
      if (c[k].value !== "") body[k] = parseFloat(c[k].value);
    if (c.precision.value !== "fp32") body.precision = c.precision.value;
    if (c.length_grouped.checked) body.length_grouped = true;
    return body;
  }
  const m = $("#mlm-fields").elements;
  Object.assign(body, { tokenizer: pickValue(m.tokenizer), train: pickValue(m.train), config: m.config.value });
  if (pickValue(m.validation)) body.validation = pickValue(m.validation);
  // A field left empty is the server's default: not sent (NaN would go as null, refused).
  for (const k of ["epochs", "max_steps", "batch", "warmup_steps", "seed", "threads", "ranks", "grad_accum", "keep_last"])
    if (m[k].value !== "") body[k] = parseInt(m[k].value, 10);
  for (const k of ["weight_decay", "mlm_probability", "label_smoothing", "clip_norm"]) if (m[k].value !== "") body[k] = parseFloat(m[k].value);
  const ck = parseInt(m.checkpoint_steps.value, 10);
  if (ck > 0) body.checkpoint_steps = ck;
  if (m.lr.value !== "") body.lr = parseFloat(m.lr.value);
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
    // Until it starts, then to its run's page; but not once the user has gone elsewhere
    // (the page jumped to the run from wherever they were when the job started).
    const here = location.hash;
    for (let i = 0; i < 600 && location.hash === here; i++) {
      const j = await api("GET", "/jobs/" + job.id);
      if (location.hash !== here) break;
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
    if (input && input.setAttribute) {
      const more = input.closest("details");   /* a field of "More options" is shown to be marked */
      if (more) more.open = true;
      input.setAttribute("aria-invalid", "true"); input.setAttribute("aria-describedby", "new-msg"); input.focus();
    }
  }
  btn.disabled = false;
});

// The playground: every revision of every model, top-k predictions as bars.
// #/playground/NAME picks that model (a run page's "Try this model" links it).
async function showPlayground(want) {
  show("playground");
  const sel = $("#fill-model");
  $("#fill-msg").textContent = "";   /* (another model's "No model ..." stayed) */
  try {
    const models = await api("GET", "/models");
    const opts = [];
    // The models' revisions asked at once (one after another, 66 models took 2.7 s).
    const fulls = await Promise.all(models.map((m) => api("GET", "/models/" + encodeURIComponent(m.name))));
    // Classifiers have their own playground: only masked LMs here (config.json's architectures).
    const cfgs = await Promise.all(models.map((m) =>
      api("GET", `/models/${encodeURIComponent(m.name)}/resolve/main/config.json`).catch(() => null)));
    models.forEach((m, i) => {
      const arch = cfgs[i] && Array.isArray(cfgs[i].architectures) ? String(cfgs[i].architectures[0]) : "";
      if (arch.endsWith("ForSequenceClassification")) return;
      opts.push(el("option", { value: m.name, text: `${m.name} (newest)` }));
      for (const r of fulls[i].revisions || [])
        opts.push(el("option", { value: `${m.name}@${r.commit}`, text: `${m.name}@${r.commit.slice(0, 8)} · ${r.message}` }));
    });
    const keep = want || sel.value;
    sel.replaceChildren(...opts);
    if (keep && opts.some((o) => o.value === keep)) sel.value = keep;
    else if (want) $("#fill-msg").textContent = `No model ${want} in the store.`;
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
  msg.textContent = "";
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
