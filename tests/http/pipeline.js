// The data pipeline from the web page, in Debian's chromium driven by playwright-core.
//   node tests/http/pipeline.js BASE_URL ARTIFACT_DIR TOKEN TRAIN_TEXT VALID_TEXT
// Logs in with the ?token= link; in the Data view uploads TRAIN_TEXT (its upload bar and
// result: name, size, sha256), trains a tokenizer on it (vocabulary 1000) and prepares a
// training dataset, uploads VALID_TEXT and prepares a validation dataset (sequences of
// 64), each job watched to its end; starts a run from the new-run form's dropdowns (the
// tokenizer and datasets just made preselected), watches it end in the run view, follows
// its "Try this model" link to the fill-mask playground and fills a mask. Also: refusals
// and a failed job (DATA_DIR's broken.txt is not UTF-8) shown in their step's status line, nothing fetched from another origin, no console error,
// the Data view on a phone-sized screen. Prints PASS/FAIL lines; screenshots go to ARTIFACT_DIR.
"use strict";
const path = require("path");
const fs = require("fs");
const os = require("os");
const crypto = require("crypto");
const { chromium } = require("playwright-core");

const [base, art, apiToken, trainText, validText] = process.argv.slice(2);
let failures = 0;
function check(ok, name, why) {
  if (ok) console.log("PASS " + name);
  else { console.log(`FAIL ${name}: ${why}`); failures++; }
}
const sha256 = (file) => crypto.createHash("sha256").update(fs.readFileSync(file)).digest("hex");
const t0 = Date.now();
const secs = () => ((Date.now() - t0) / 1000).toFixed(1) + " s";

async function main() {
  fs.mkdirSync(art, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "maskd-chromium-"));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const errors = [], foreign = [];
  const origin = new URL(base).origin;
  try {
    const page = ctx.pages()[0] || await ctx.newPage();
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text() + " " + ((m.location() || {}).url || "")); });
    page.on("request", (r) => { const u = r.url(); if (!u.startsWith("data:") && new URL(u).origin !== origin) foreign.push(u); });
    page.setDefaultTimeout(20000);
    const shot = (name) => page.screenshot({ path: path.join(art, name + ".png"), fullPage: true });
    const text = (sel) => page.$eval(sel, (e) => e.textContent);
    // A job row's end: its status, whether progress was shown, its text and error.
    const jobEnd = async (box, timeout) => {
      await page.waitForFunction((b) => /^(done|failed|cancelled|interrupted)$/.test(document.querySelector(b).dataset.status || ""),
                                 box, { timeout });
      return page.$eval(box, (b) => ({ status: b.dataset.status, progress: b.dataset.progressSeen === "1",
                                       text: b.querySelector(".job-head").textContent, error: b.querySelector(".msg").textContent }));
    };

    // The login link, then the Data view from the navigation.
    await page.goto(base + "/?token=" + encodeURIComponent(apiToken));
    await page.click("nav a[data-nav=data]");
    await page.waitForSelector("#view-data:not([hidden])");
    const a11y = await page.evaluate(() => {
      const v = document.querySelector("#view-data");
      const named = [...v.querySelectorAll("input, select")].filter((e) => e.name && e.type !== "checkbox");
      return { unlabelled: named.filter((e) => !e.labels.length || !e.labels[0].textContent.trim()).map((e) => e.name),
               status: [...v.querySelectorAll("form .msg")].map((m) => m.getAttribute("role")),
               active: document.querySelector("nav a.active").dataset.nav };
    });
    check(!a11y.unlabelled.length && a11y.status.length === 3 && a11y.status.every((r) => r === "status") && a11y.active === "data",
          "pipeline_data_view", JSON.stringify(a11y));

    // 1. Upload the training corpus: the name comes from the file, the bar fills, the result names it.
    await page.setInputFiles("#upload-form input[name=file]", trainText);
    const suggested = await page.$eval("#upload-form input[name=name]", (i) => i.value);
    await page.click("#upload-form button[type=submit]");
    await page.waitForFunction(() => !document.querySelector("#upload-result").hidden || /error/.test(document.querySelector("#upload-msg").className));
    const up = await page.evaluate(() => ({
      msg: document.querySelector("#upload-msg").textContent,
      bar: document.querySelector("#upload-progress").getAttribute("aria-valuenow"),
      result: Object.fromEntries([...document.querySelectorAll("#upload-result div")].map((d) =>
        [d.querySelector("b").textContent, [d.querySelector("span").textContent, (d.querySelector("[title]") || {}).title || ""]])) }));
    const bytes = fs.statSync(trainText).size, hash = sha256(trainText);
    check(suggested === "wiki.txt" && up.bar === "100" && up.result.Name && up.result.Name[0] === "wiki.txt" &&
          up.result.Size[0].includes(bytes.toLocaleString("en-US")) && up.result.sha256[1] === hash && up.result.sha256[0] === hash.slice(0, 12),
          "pipeline_upload", JSON.stringify({ suggested, up, bytes }));
    await page.waitForFunction(() => [...document.querySelectorAll("#corpora-table tbody td:first-child")].some((t) => t.textContent === "wiki.txt"));
    const picked = await page.evaluate(() => ({
      ticked: [...document.querySelectorAll("#tok-corpora input:checked")].map((i) => i.value),
      corpus: document.querySelector("#ds-form select[name=input]").value,
      tokName: document.querySelector("#tok-form input[name=name]").value }));
    check(picked.ticked.join() === "wiki.txt" && picked.corpus === "wiki.txt" && picked.tokName === "wiki-tok",
          "pipeline_upload_feeds_next_steps", JSON.stringify(picked));
    await shot("uploaded");

    // 2. A tokenizer on it.
    await page.fill("#tok-form input[name=vocab_size]", "1000");
    await page.click("#tok-form button[type=submit]");
    await page.waitForSelector("#tok-job:not([hidden])");
    const tok = await jobEnd("#tok-job", 60000);
    check(tok.status === "done", "pipeline_tokenizer", JSON.stringify(tok));
    await page.waitForFunction(() => document.querySelector("#tokenizers-table tbody tr[data-name='wiki-tok']") &&
                                     document.querySelector("#ds-form select[name=tokenizer]").value === "wiki-tok");
    const tokRow = await page.$$eval("#tokenizers-table tbody tr[data-name='wiki-tok'] td", (tds) => tds.map((t) => t.textContent));
    check(/ready/.test(await text("#tok-msg")) && tokRow[0] === "wiki-tok", "pipeline_tokenizer_listed", JSON.stringify(tokRow));
    // An upload the server refuses (the name taken; bytes that are not UTF-8 text): its answer in the step's status line.
    const bin = path.join(art, "binary.bin");
    fs.writeFileSync(bin, Buffer.from([0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, 0x0a]));
    for (const [file, name, want, check_] of [[trainText, "wiki.txt", /^409 /, "pipeline_upload_name_taken"], [bin, "binary.bin", /^4(15|22) /, "pipeline_upload_not_text"]]) {
      await page.setInputFiles("#upload-form input[name=file]", file);
      await page.fill("#upload-form input[name=name]", name);
      await page.click("#upload-form button[type=submit]");
      await page.waitForFunction(() => !document.querySelector("#upload-form button[type=submit]").disabled &&
                                       /error|ok/.test(document.querySelector("#upload-msg").className));
      const m = await page.$eval("#upload-msg", (e) => [e.className, e.textContent]);
      check(/error/.test(m[0]) && want.test(m[1]), check_, JSON.stringify(m));
    }
    fs.rmSync(bin);
    await page.fill("#upload-form input[name=name]", "");
    // The same tokenizer name again: refused, and the refusal is the step's status line.
    await page.fill("#tok-form input[name=name]", "wiki-tok");
    await page.click("#tok-form button[type=submit]");
    const refusedShown = await page.waitForFunction(() => /^4\d\d .*already exists|^4\d\d .*registered/.test(document.querySelector("#tok-msg").textContent) &&
                                     /error/.test(document.querySelector("#tok-msg").className), null, { timeout: 10000 }).then(() => true, () => false);
    check(refusedShown, "pipeline_error_in_status", await page.$eval("#tok-msg", (e) => e.className + ": " + e.textContent));

    // 3. The training dataset: tokenizer and corpus preselected, a name suggested.
    const dsPre = await page.evaluate(() => { const f = document.querySelector("#ds-form");
      return [f.tokenizer.value, f.input.value, f.split.value, f.name.value]; });
    check(JSON.stringify(dsPre) === JSON.stringify(["wiki-tok", "wiki.txt", "train", "wiki-train"]), "pipeline_dataset_form_preselected", JSON.stringify(dsPre));
    await page.fill("#ds-form input[name=seq_len]", "64");
    await page.click("#ds-form button[type=submit]");
    await page.waitForSelector("#ds-job:not([hidden])");
    const dsTrain = await jobEnd("#ds-job", 60000);
    check(dsTrain.status === "done", "pipeline_dataset_train", JSON.stringify(dsTrain));

    // The validation corpus: uploaded, then its dataset (the split suggested from its name).
    await page.setInputFiles("#upload-form input[name=file]", validText);
    await page.click("#upload-form button[type=submit]");
    await page.waitForFunction(() => /^Uploaded wiki-valid\.txt/.test(document.querySelector("#upload-msg").textContent) ||
                                     /error/.test(document.querySelector("#upload-msg").className));
    await page.waitForFunction(() => document.querySelector("#ds-form select[name=input]").value === "wiki-valid.txt", null, { timeout: 5000 }).catch(() => {});
    const vPre = await page.evaluate(() => { const f = document.querySelector("#ds-form");
      return [f.tokenizer.value, f.input.value, f.split.value, f.name.value, document.querySelector("#upload-msg").textContent]; });
    check(JSON.stringify(vPre.slice(0, 4)) === JSON.stringify(["wiki-tok", "wiki-valid.txt", "validation", "wiki-valid-validation"]),
          "pipeline_upload_validation", JSON.stringify(vPre));
    await page.click("#ds-form button[type=submit]");
    await page.waitForFunction(() => /wiki-valid-validation/.test(document.querySelector("#ds-msg").textContent));
    const dsValid = await jobEnd("#ds-job", 60000);
    check(dsValid.status === "done", "pipeline_dataset_validation", JSON.stringify(dsValid));
    await page.waitForFunction(() => ["wiki-train", "wiki-valid-validation"].every((n) =>
      document.querySelector(`#datasets-table tbody tr[data-name='${n}']`)));
    const dsRows = await page.$$eval("#datasets-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
    check(dsRows.length === 2, "pipeline_datasets_listed", JSON.stringify(dsRows));
    // A job that fails (a file of the data folder that is not UTF-8): its error in the step's status line.
    await page.selectOption("#ds-form select[name=input]", "broken.txt");
    await page.fill("#ds-form input[name=name]", "broken");
    await page.click("#ds-form button[type=submit]");
    await page.waitForFunction(() => /broken/.test(document.querySelector("#ds-msg").textContent));
    const dsBroken = await jobEnd("#ds-job", 60000);
    const brokenMsg = await page.$eval("#ds-msg", (e) => [e.className, e.textContent]);
    check(dsBroken.status === "failed" && /error/.test(brokenMsg[0]) && /^Job \d+ failed: .*UTF-8/.test(brokenMsg[1]),
          "pipeline_job_error_in_status", JSON.stringify({ dsBroken, brokenMsg }));
    // Progress: shown by a job row (a fast job may end between two polls), and the API's.
    check(tok.progress || dsTrain.progress || dsValid.progress, "pipeline_job_progress_shown", JSON.stringify([tok.text, dsTrain.text, dsValid.text]));
    await shot("data");
    console.log(`# data steps done at ${secs()}`);

    // The Data view fits a phone.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.waitForTimeout(300);
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    check(wide <= 390, "pipeline_phone_fits", `page is ${wide}px wide`);
    await shot("phone-data");
    await page.setViewportSize({ width: 1280, height: 900 });

    // 4. A run from the form's dropdowns: what the Data view made is preselected.
    await page.click("nav a[data-nav=new]");
    await page.waitForFunction(() => document.querySelector("#mlm-fields select[name=tokenizer]").value === "wiki-tok", null, { timeout: 10000 }).catch(() => {});
    const form = await page.evaluate(() => {
      const m = document.querySelector("#mlm-fields").elements;
      const opts = (s) => [...s.options].filter((o) => !o.dataset.path).map((o) => o.value);
      return { tok: m.tokenizer.value, train: m.train.value, valid: m.validation.value, tag: m.tokenizer.tagName,
               toks: opts(m.tokenizer), trains: opts(m.train), valids: opts(m.validation) };
    });
    check(form.tag === "SELECT" && form.tok === "wiki-tok" && form.train === "wiki-train" && form.valid === "wiki-valid-validation" &&
          form.toks.join() === "wiki-tok" && form.trains.join() === "wiki-train,wiki-valid-validation" &&
          form.valids.join() === ",wiki-train,wiki-valid-validation", "pipeline_run_form_dropdowns", JSON.stringify(form));
    // "a path inside the data folder…" shows its text field, and hides it again.
    const pathOpt = await page.$eval("#mlm-fields select[name=tokenizer] option[data-path]", (o) => o.value);
    await page.selectOption("#mlm-fields select[name=tokenizer]", pathOpt);
    const shown = await page.$eval("#mlm-fields input[name=tokenizer_path]", (i) => !i.disabled && !i.closest("label").hidden);
    await page.selectOption("#mlm-fields select[name=tokenizer]", "wiki-tok");
    const hidden = await page.$eval("#mlm-fields input[name=tokenizer_path]", (i) => i.disabled && i.closest("label").hidden);
    check(shown && hidden, "pipeline_run_form_path_choice", JSON.stringify({ shown, hidden }));
    await page.fill("#new-form input[name=name]", "pipe-run");
    await page.selectOption("#new-form select[name=config]", "tiny");
    for (const [k, v] of [["max_steps", "40"], ["batch", "8"], ["lr", "0.001"], ["checkpoint_steps", "20"], ["threads", "2"]])
      await page.fill(`#mlm-fields input[name=${k}]`, v);
    await shot("new-run");
    await page.click("#new-form button[type=submit]");
    await page.waitForFunction(() => /^#\/runs\/\d+$/.test(location.hash), null, { timeout: 30000 });
    await page.waitForFunction(() => /done|failed|cancelled/.test(document.querySelector("#run-title").textContent), null, { timeout: 120000 });
    await page.waitForFunction(() => +document.querySelector("#chart-loss").dataset.points === 40, null, { timeout: 10000 }).catch(() => {});
    // The revisions table follows its own refresh: once (of 6000 checks) it still showed one
    // revision when the title said done.
    await page.waitForFunction(() => document.querySelectorAll("#rev-table tbody tr td:nth-child(2)").length === 2, null, { timeout: 10000 }).catch(() => {});
    const run = await page.evaluate(() => ({ title: document.querySelector("#run-title").textContent,
      loss: +document.querySelector("#chart-loss").dataset.points, revisions: document.querySelectorAll("#rev-table tbody tr td:nth-child(2)").length,
      summary: Object.fromEntries([...document.querySelectorAll("#run-summary div")].map((d) => [d.querySelector("b").textContent, d.querySelector("span").textContent])),
      cfg: Object.fromEntries([...document.querySelectorAll("#config-table tr")].map((t) => [t.cells[0].textContent, t.cells[1].textContent])) }));
    check(/^pipe-run done/.test(run.title) && run.summary.Step === "40 / 40" && run.loss === 40 && run.revisions === 2 && /(^|\/)wiki-tok(\/|$)/.test(run.cfg.tokenizer) &&
          /(^|\/)wiki-train$/.test(run.cfg.train) && /(^|\/)wiki-valid-validation$/.test(run.cfg.validation), "pipeline_run", JSON.stringify(run).slice(0, 600));
    console.log(`# run done at ${secs()}`);

    // 5. "Try this model": the playground with the run's model picked; it fills the mask.
    await page.waitForSelector("#run-try:not([hidden]) a");
    await shot("run");
    await page.click("#run-try a");
    // The run's own newest revision, by its commit.
    await page.waitForFunction(() => location.hash.startsWith("#/playground/pipe-run%40") &&
                                     /^pipe-run@[0-9a-f]{40}$/.test(document.querySelector("#fill-model").value));
    await page.fill("#fill-form textarea", "The [MASK] of the city .");
    await page.fill("#fill-form input[name=top_k]", "5");
    await page.click("#fill-form button[type=submit]");
    await page.waitForFunction(() => document.querySelectorAll("#fill-results .pred").length > 0 || /error/.test(document.querySelector("#fill-msg").className));
    const preds = await page.$$eval("#fill-results .pred", (ps) => ps.map((p) => [p.querySelector(".tok").textContent,
      parseFloat(p.querySelector(".p").textContent), p.querySelector(".seq").textContent]));
    check(preds.length === 5 && preds.every((p, i) => p[1] > 0 && (i === 0 || p[1] <= preds[i - 1][1])) &&
          preds.every((p) => /of the city/i.test(p[2])), "pipeline_fill_mask", JSON.stringify(preds) + " " + await text("#fill-msg"));
    await shot("fill-mask");

    check(foreign.length === 0, "pipeline_same_origin_only", foreign.slice(0, 5).join(" "));
    // The 409s (names taken) and the 415 or 422 (not text) were provoked on purpose.
    const unexpected = errors.filter((e) => !/status of (409|415|422)/.test(e));
    check(unexpected.length === 0, "pipeline_no_console_errors", unexpected.join(" | "));
    console.log(`# pipeline took ${secs()}`);
  } finally {
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main().then(() => process.exit(failures ? 1 : 0), (e) => {
  console.log("FAIL pipeline: " + String(e && e.stack || e).split("\n").slice(0, 3).join(" "));
  process.exit(1);
});
