// The page in a real browser: Debian's chromium driven by playwright-core.
//   node tests/http/browser.js BASE_URL ARTIFACT_DIR TOKEN TOKENIZER TRAIN VALID CLS_RUN LONG_RUN
// Opens the page, sees the runs table, opens a run and its charts, opens the
// text-classification run CLS_RUN (fine-tuned on banking77/train.csv in the data folder): its F1
// curves with their values, the most confused label pairs per evaluation, its best revision
// (tried in the classify playground) and test results; submits a small run from the form
// (refused until logged in: a wrong token, then the right one typed into the login form)
// and watches its progress move, then a fine-tuning job from the form's classification
// fields (refused first for a missing file, the field marked); uses the fill-mask
// playground; logs in with the ?token= link (an HttpOnly cookie the page's script
// cannot read); draws LONG_RUN's 150,000 steps; on a laptop-sized and a phone-sized viewport. Prints PASS/FAIL
// lines; screenshots go to ARTIFACT_DIR.
"use strict";
const path = require("path");
const fs = require("fs");
const os = require("os");
const { chromium } = require("playwright-core");

const [base, art, apiToken, tokenizer, train, valid, clsRun, longRun, otherApp] = process.argv.slice(2);
let failures = 0;
function check(ok, name, why) {
  if (ok) console.log("PASS " + name);
  else { console.log(`FAIL ${name}: ${why}`); failures++; }
}

async function main() {
  fs.mkdirSync(art, { recursive: true });
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "maskd-chromium-"));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1280, height: 860 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const errors = [];
  try {
    const page = ctx.pages()[0] || await ctx.newPage();
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text() + " " + ((m.location() || {}).url || "")); });
    page.setDefaultTimeout(20000);

    // A wrong token in the link: a 401, no cookie.
    const bad = await page.goto(base + "/?token=wrong");
    const noCookies = (await ctx.cookies(base)).length === 0;
    check(bad.status() === 401 && noCookies, "browser_login_link_wrong_token", `status ${bad.status()}, cookies ${!noCookies}`);

    // Runs table: a row per run, the fine-tuning one tagged with its task.
    await page.goto(base + "/");
    await page.waitForSelector("#runs-table tbody tr");
    const rowOf = (name) => `#runs-table tbody tr:has(td:first-child > a:text-is("${name}"))`;
    const cells = await page.$$eval(rowOf("seed-run") + " td", (tds) => tds.map((t) => t.textContent));
    check(cells.length === 7 && cells[0] === "seed-run" && cells[1] === "done" && cells[2] === "tiny" && cells[3] === "20 / 20" &&
          parseFloat(cells[4]) > 0, "browser_runs_table", JSON.stringify(cells));
    const clsCells = await page.$$eval(rowOf(clsRun) + " td", (tds) => tds.map((t) => t.textContent));
    const clsTag = await page.$eval(rowOf(clsRun) + " td:first-child .tag", (t) => t.textContent).catch(() => null);
    const seedTags = await page.$$eval(rowOf("seed-run") + " .tag", (t) => t.length);
    check(clsTag === "text classification" && clsCells[1] === "done" && clsCells[2] === "seed-run" && seedTags === 0,
          "browser_runs_task_tag", JSON.stringify({ clsTag, clsCells, seedTags }));
    const clsId = await page.$eval(rowOf(clsRun), (tr) => tr.dataset.run);
    const longId = await page.$eval(rowOf(longRun), (tr) => tr.dataset.run);
    const seedId = await page.$eval(rowOf("seed-run"), (tr) => tr.dataset.run);
    const noTestId = await page.$eval(rowOf("cls-notest"), (tr) => tr.dataset.run);
    // Status badges readable (WCAG AA: text contrast at least 4.5 against its background;
    // "done" and "interrupted" read 3.8 and 2.9), a long name cut and whole in its tooltip.
    const contrast = await page.evaluate(() => {
      const lum = (c) => { const v = c.match(/\d+/g).slice(0, 3).map((x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; });
                           return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; };
      return ["queued", "running", "done", "failed", "cancelled", "interrupted"].map((k) => {
        const b = document.createElement("span");
        b.className = "status " + k;
        document.body.append(b);
        const cs = getComputedStyle(b), a = lum(cs.color), z = lum(cs.backgroundColor);
        b.remove();
        return [k, +((Math.max(a, z) + 0.05) / (Math.min(a, z) + 0.05)).toFixed(2)];
      });
    });
    check(contrast.every(([, r]) => r >= 4.5), "browser_status_badges_contrast", JSON.stringify(contrast));
    const nameCell = await page.$eval(rowOf("seed-run") + " a", (a) => [a.title, getComputedStyle(a).textOverflow, getComputedStyle(a).maxWidth]);
    check(nameCell[0] === "seed-run" && nameCell[1] === "ellipsis" && nameCell[2] !== "none", "browser_runs_long_names_cut", JSON.stringify(nameCell));
    // The table refreshes every 2 s without taking the focus away: a keyboard user's link
    // keeps it (the rows were rebuilt, the focus fell to the body, Enter did nothing).
    await page.focus(rowOf("seed-run") + " a");
    await page.waitForTimeout(2600);
    const focused = await page.evaluate(() => document.activeElement && document.activeElement.textContent);
    check(focused === "seed-run", "browser_runs_table_keeps_focus", `focus on ${JSON.stringify(focused)} after a refresh`);
    // Tick labels read as their values: a learning rate up to 1e-3 is ticked every 2.5e-4,
    // which three digits wrote "3e-4" and "8e-4".
    const ticks = await page.evaluate(() => {
      const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
      document.body.append(svg);
      drawChart(svg, [{ x: 0, y: 0 }, { x: 1, y: 0.001 }], "step");
      const t = [...svg.querySelectorAll("text[text-anchor=end]")].map((x) => x.textContent);
      svg.remove();
      return t;
    });
    check(ticks.length >= 3 && ticks.every((t) => Math.abs(+t * 4000 - Math.round(+t * 4000)) < 1e-6) && ticks.includes("2.5e-4"),
          "browser_chart_tick_labels_exact", JSON.stringify(ticks));
    // A run's page left before its answer came (a slow server): the next run's page shows
    // its own run, not the late answer's.
    await page.route("**/runs/" + seedId, async (route) => { await new Promise((r) => setTimeout(r, 1500)); await route.continue(); });
    await page.goto(base + "/#/runs/" + seedId);
    await page.waitForTimeout(300);
    await page.evaluate((id) => { location.hash = "#/runs/" + id; }, clsId);
    await page.waitForTimeout(2500);
    const shownTitle = await page.$eval("#run-title", (t) => t.textContent);
    check(shownTitle.startsWith(clsRun + " "), "browser_run_page_ignores_late_answer", `title "${shownTitle}" on run ${clsId}'s page`);
    await page.unroute("**/runs/" + seedId);
    await page.goto(base + "/");
    await page.waitForSelector("#runs-table tbody tr");
    await page.screenshot({ path: path.join(art, "runs.png"), fullPage: true });

    // A run's page: summary, five charts with data, revisions, config.
    await page.click(rowOf("seed-run"));
    await page.waitForFunction(() => document.querySelector("#chart-loss").dataset.points > 0 &&
                                     document.querySelector("#chart-eval-loss").dataset.points > 0);
    const pts = await page.$$eval("svg.chart", (s) => s.map((x) => [x.id, +x.dataset.points]));
    const byId = Object.fromEntries(pts);
    check(byId["chart-loss"] === 20 && byId["chart-lr"] === 20 && byId["chart-eval-loss"] >= 1 &&
          byId["chart-accuracy"] >= 1 && byId["chart-perplexity"] >= 1, "browser_run_charts", JSON.stringify(pts));
    const lossLine = await page.$eval("#chart-loss polyline", (p) => p.getAttribute("points").split(" ").length);
    check(lossLine === 20, "browser_loss_polyline", `polyline has ${lossLine} points`);
    await page.waitForSelector("#rev-table tbody tr td:nth-child(2)");
    const rev = await page.$eval("#rev-table tbody tr", (tr) => tr.textContent);
    check(/Training in progress epoch 1/.test(rev), "browser_run_revisions", rev);
    const cfg = await page.$$eval("#config-table tr", (trs) => trs.map((t) => t.textContent));
    check(cfg.some((t) => t === "max_steps20"), "browser_run_config", cfg.slice(0, 5).join(" | "));
    // The seed run ran on 2 ranks: the summary says where, and each rank's rate.
    const summary = await page.$$eval("#run-summary div", (ds) => Object.fromEntries(ds.map((d) =>
      [d.querySelector("b").textContent, d.querySelector("span").textContent])));
    check(/^2 on /.test(summary["Ranks"] || "") && /^0: [\d,]+, 1: [\d,]+$/.test(summary["Tokens/s per rank"] || "") &&
          /% hidden behind backward/.test(summary["Communication"] || ""), "browser_run_ranks", JSON.stringify(summary));
    check(summary["Precision"] === "fp32", "browser_run_precision", JSON.stringify(summary));
    const runBar = await page.$eval("#run-bar", (b) => { const p = b.parentElement; return [p.getAttribute("role"), p.getAttribute("aria-valuenow"), p.getAttribute("aria-label")]; });
    check(runBar[0] === "progressbar" && runBar[1] === "100" && runBar[2], "browser_run_progress_role", JSON.stringify(runBar));
    // A masked-LM run shows none of the classification parts.
    const mlmView = await page.evaluate(() => ({
      f1: document.querySelector("#chart-f1").closest("figure").hidden, ppl: document.querySelector("#chart-perplexity").closest("figure").hidden,
      cls: document.querySelector("#run-cls").hidden, acc: document.querySelector("#cap-accuracy").textContent,
      task: "Task" in Object.fromEntries([...document.querySelectorAll("#run-summary b")].map((b) => [b.textContent, 1])) }));
    check(mlmView.f1 && !mlmView.ppl && mlmView.cls && mlmView.acc === "Masked-token accuracy" && !mlmView.task,
          "browser_run_mlm_unchanged", JSON.stringify(mlmView));
    await page.screenshot({ path: path.join(art, "run.png"), fullPage: true });
    // "Try this model" opens this run's newest revision by its commit: the repository's
    // newest can be another run's, trained into the same name later.
    const seedRevs = await page.evaluate(async () => (await (await fetch("/runs/seed-run")).json()).revisions);
    const tryHref = await page.$eval("#run-try-link", (a) => a.getAttribute("href"));
    const wantTry = "#/playground/" + encodeURIComponent("seed-run@" + seedRevs[0].commit);
    await page.click("#run-try-link");
    await page.waitForFunction((v) => document.querySelector("#fill-model").value === v, "seed-run@" + seedRevs[0].commit)
      .catch(() => null);
    const picked = await page.$eval("#fill-model", (s) => s.value);
    check(tryHref === wantTry && picked === "seed-run@" + seedRevs[0].commit, "browser_run_try_this_revision",
          `href ${tryHref}, want ${wantTry}; playground picked ${picked}`);


    // The text-classification run: what the page shows against what the API says.
    const api = (p) => page.evaluate(async (p) => (await fetch(p)).json(), p);
    const [clsFull, clsMetrics] = [await api("/runs/" + clsId), await api(`/runs/${clsId}/metrics`)];
    const eps = clsMetrics.epochs;
    await page.goto(base + "/#/runs/" + clsId);
    await page.waitForFunction(() => document.querySelector("#chart-f1").dataset.points > 0 &&
                                     document.querySelectorAll("#cls-results .test-results td").length > 0);
    const v3 = (x) => String(+x.toPrecision(3));
    const f1 = await page.evaluate(() => {
      const svg = document.querySelector("#chart-f1");
      return { shown: !svg.closest("figure").hidden, points: +svg.dataset.points, lines: svg.querySelectorAll("polyline").length,
               vals: [...svg.querySelectorAll("text.val")].map((t) => [t.getAttribute("class"), t.textContent]),
               legend: [...svg.querySelectorAll("text.legend")].map((t) => t.textContent),
               caption: svg.closest("figure").querySelector("figcaption").textContent };
    });
    const want = [...eps.map((e) => ["val s0", v3(e.eval_macro_f1)]), ...eps.map((e) => ["val s1", v3(e.eval_weighted_f1)])];
    check(eps.length === 3 && f1.shown && f1.points === 6 && f1.lines === 2 && JSON.stringify(f1.vals) === JSON.stringify(want) &&
          f1.legend.join() === "macro,weighted" && eps.some((e) => e.eval_macro_f1 > 0) && /F1/.test(f1.caption), "browser_cls_f1_chart", JSON.stringify({ f1, want }));
    const acc = await page.evaluate(() => {
      const svg = document.querySelector("#chart-accuracy");
      return { points: +svg.dataset.points, vals: [...svg.querySelectorAll("text.val")].map((t) => t.textContent),
               caption: document.querySelector("#cap-accuracy").textContent,
               ppl: document.querySelector("#chart-perplexity").closest("figure").hidden,
               evalLoss: +document.querySelector("#chart-eval-loss").dataset.points, loss: +document.querySelector("#chart-loss").dataset.points };
    });
    check(acc.points === 3 && acc.vals.join() === eps.map((e) => v3(e.eval_accuracy)).join() && acc.caption === "Validation accuracy" &&
          acc.ppl && acc.evalLoss === 6 && acc.loss > 0, "browser_cls_accuracy_and_loss_charts", JSON.stringify(acc));
    // The confusion table: the newest epoch's pairs, then the first epoch's, then the test set's.
    const confRows = () => page.$$eval("#confusion-table tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
    const asRows = (list) => list.map((c) => [c.true, "→", c.pred, String(c.count)]);
    const last = await confRows();
    check(last.length >= 1 && last.length <= 10 && JSON.stringify(last) === JSON.stringify(asRows(eps[2].confusion)),
          "browser_cls_confusion_latest", JSON.stringify(last.slice(0, 2)));
    await page.selectOption("#confusion-epoch", "0");
    const first = await confRows();
    check(JSON.stringify(first) === JSON.stringify(asRows(eps[0].confusion)), "browser_cls_confusion_epoch", JSON.stringify(first.slice(0, 2)));
    await page.selectOption("#confusion-epoch", "test");
    const testRows = await confRows();
    check(testRows.length > 0 && JSON.stringify(testRows) === JSON.stringify(asRows(clsFull.results.test.confusion)),
          "browser_cls_confusion_test", JSON.stringify(testRows.slice(0, 2)));
    const res = await page.evaluate(() => ({
      best: document.querySelector("#cls-results .best-revision code").textContent,
      bestText: document.querySelector("#cls-results .best-revision").textContent,
      test: Object.fromEntries([...document.querySelectorAll("#cls-results .test-results tr")].map((tr) => [tr.cells[0].textContent, tr.cells[1].textContent])),
      tagged: [...document.querySelectorAll("#rev-table tbody tr")].filter((tr) => tr.querySelector(".tag.best")).map((tr) => tr.cells[0].textContent),
    }));
    const bestSeq = String(clsFull.results.best_revision);
    check(res.best === clsRun + "@best" && res.bestText.includes(`${clsRun}@${bestSeq}`) && res.tagged.join() === bestSeq &&
          parseFloat(res.test["Accuracy"]) === +clsFull.results.test.accuracy.toPrecision(4) &&
          parseFloat(res.test["Macro-F1"]) === +clsFull.results.test.macro_f1.toPrecision(4) && "Weighted-F1" in res.test,
          "browser_cls_best_and_test", JSON.stringify({ res, bestSeq }));
    const clsSummary = await page.$$eval("#run-summary div", (ds) => Object.fromEntries(ds.map((d) =>
      [d.querySelector("b").textContent, d.querySelector("span").textContent])));
    const clsCfg = await page.$$eval("#config-table tr", (trs) => trs.slice(0, 2).map((t) => [t.cells[0].textContent, t.cells[1].textContent]));
    check(clsSummary["Task"] === "text classification" && clsSummary["Base model"] === "seed-run" && "Best val. macro-F1" in clsSummary &&
          JSON.stringify(clsCfg) === JSON.stringify([["task", "text-classification"], ["model (base)", "seed-run"]]),
          "browser_cls_task_and_base", JSON.stringify({ clsSummary, clsCfg }));
    await page.screenshot({ path: path.join(art, "run-cls.png"), fullPage: true });
    // A finished run without a test file: its best revision is the best, not "so far".
    await page.goto(base + "/#/runs/" + noTestId);
    await page.waitForSelector("#cls-results .best-revision b");
    const noTestBest = await page.$eval("#cls-results .best-revision b", (b) => b.textContent);
    check(noTestBest === "Best revision", "browser_cls_done_without_test_best", noTestBest);
    await page.goto(base + "/#/runs/" + clsId);
    await page.waitForSelector("#cls-results .best-revision a[href^='#/classify/']");
    // NAME@best in the classify playground: picked there, and it answers.
    await page.click("#cls-results .best-revision a[href^='#/classify/']");
    await page.waitForFunction((m) => document.querySelector("#tc-model").value === m, clsRun + "@best");
    await page.click("#tc-form button[type=submit]");
    await page.waitForSelector("#tc-results .pred");
    const tcLabels = await page.$$eval("#tc-results .pred", (ps) => ps.length);
    check(tcLabels === clsFull.config.labels.length && tcLabels === 4, "browser_cls_best_classifies", `${tcLabels} labels`);

    // Start a run from the form and watch it move.
    await page.click("nav a[data-nav=new]");
    await page.waitForSelector("#view-new:not([hidden])");
    await page.waitForFunction(() => document.querySelector("#new-form").tokenizer.value !== "");
    const pre = await page.$eval("#mlm-fields", (f) => [f.elements.tokenizer.value, f.elements.train.value]);
    check(pre[0] === tokenizer && pre[1] === train, "browser_form_prefilled", JSON.stringify(pre));
    await page.fill("#new-form input[name=name]", "browser-run");
    await page.selectOption("#new-form select[name=config]", "tiny");
    // Long enough that the cancel below always comes before the run's end.
    await page.fill("#mlm-fields input[name=max_steps]", "100000");
    await page.fill("#mlm-fields input[name=batch]", "8");
    await page.selectOption("#mlm-fields select[name=precision]", "bf16");
    await page.click("#mlm-fields details.more summary");
    await page.fill("#mlm-fields input[name=mlm_probability]", "0.2");
    await page.fill("#mlm-fields input[name=grad_accum]", "2");
    // A field left empty is the server's default, not sent (the page sent NaN as null, which
    // POST /runs refused: "seed: must be a whole number").
    await page.fill("#mlm-fields input[name=seed]", "");
    const sent = await page.evaluate(() => runBody(document.querySelector("#new-form")));
    check(!("seed" in sent) && sent.batch === 8 && sent.grad_accum === 2, "browser_form_empty_field_not_sent", JSON.stringify(sent));
    // Not logged in: refused, and the login form appears.
    await page.click("#new-form button[type=submit]");
    await page.waitForFunction(() => /401/.test(document.querySelector("#new-msg").textContent) &&
                                     !document.querySelector("#login").hidden);
    check(true, "browser_form_needs_login", "");
    await page.fill("#login input[name=token]", "wrong");
    await page.click("#login button[type=submit]");
    await page.waitForFunction(() => /not this server's token/.test(document.querySelector("#login-msg").textContent));
    check((await ctx.cookies(base)).length === 0, "browser_login_form_wrong_token", "a cookie was set");
    await page.fill("#login input[name=token]", apiToken);
    await page.screenshot({ path: path.join(art, "login.png"), fullPage: true });
    await page.click("#login button[type=submit]");
    await page.waitForFunction(() => document.querySelector("#login").hidden);
    check(true, "browser_login_form", "");
    await page.screenshot({ path: path.join(art, "new-run.png"), fullPage: true });
    await page.click("#new-form button[type=submit]");
    await page.waitForFunction(() => /^#\/runs\/\d+$/.test(location.hash), null, { timeout: 60000 });
    const stepOf = () => page.evaluate(() => {
      const d = [...document.querySelectorAll("#run-summary div")].find((x) => x.querySelector("b").textContent === "Step");
      return d ? parseInt(d.querySelector("span").textContent, 10) : -1;
    });
    await page.waitForFunction(() => /running/.test(document.querySelector("#run-title").textContent), null, { timeout: 60000 });
    // The form's precision reached the run: its summary and config say bf16.
    await page.waitForFunction(() => [...document.querySelectorAll("#run-summary div")].some((d) =>
      d.querySelector("b").textContent === "Precision" && d.querySelector("span").textContent === "bf16"), null, { timeout: 30000 });
    check(true, "browser_form_precision", "");
    // "More options" reached it too; what was left empty took the defaults.
    const formRun = await page.evaluate(async () => (await (await fetch("/runs/" + location.hash.split("/").pop())).json()).config);
    check(formRun.mlm_probability === 0.2 && formRun.grad_accum === 2 && formRun.weight_decay === 0.001 && formRun.keep_last === 2,
          "browser_form_more_options", JSON.stringify(formRun));
    const stepFn = () => {
      const d = [...document.querySelectorAll("#run-summary div")].find((x) => x.querySelector("b").textContent === "Step");
      return d ? parseInt(d.querySelector("span").textContent, 10) : -1;
    };
    await page.waitForFunction(`(${stepFn})() > 0`, null, { timeout: 60000 });
    const s1 = await stepOf();
    let s2 = s1;
    try {
      await page.waitForFunction(`(${stepFn})() > ${s1}`, null, { timeout: 30000 });
      s2 = await stepOf();
    } catch (_) { /* reported below */ }
    check(s2 > s1 && s1 > 0, "browser_progress_moves", `step ${s1} then ${s2}`);
    await page.waitForFunction(() => document.querySelector("#chart-loss").dataset.points > 1);
    check(true, "browser_live_chart", "");
    const bar = await page.$eval("#run-bar", (b) => parseFloat(b.style.width));
    check(bar > 0 && bar <= 100, "browser_progress_bar", `width ${bar}%`);
    await page.screenshot({ path: path.join(art, "run-live.png"), fullPage: true });
    // Cancel it from the page.
    await page.click("#run-cancel");
    await page.waitForFunction(() => /^Cancelling/.test(document.querySelector("#run-cancel-msg").textContent), null, { timeout: 30000 });
    const offAfter = await page.$eval("#run-cancel", (b) => b.disabled);
    check(offAfter, "browser_cancel_button_stays_off", "the button was enabled again after the cancel was accepted");
    await page.waitForFunction(() => /cancelled/.test(document.querySelector("#run-title").textContent), null, { timeout: 60000 });
    check(true, "browser_cancel", "");
    // Resumed from the page: the run trains again from its checkpoint and the page follows
    // it; then it is cancelled once more (the button is on again for this new run).
    await page.waitForSelector("#run-resume:not([hidden])");
    await page.click("#run-resume");
    const resumed = await page.waitForFunction(() => /running|done/.test(document.querySelector("#run-title").textContent), null,
                                               { timeout: 60000 }).then(() => true).catch(() => false);
    check(resumed, "browser_resume", "the run did not run again: " + await page.$eval("#run-cancel-msg", (m) => m.textContent));
    if (/running/.test(await page.$eval("#run-title", (t) => t.textContent))) {
      await page.waitForSelector("#run-cancel:not([hidden]):not([disabled])");
      await page.click("#run-cancel");
      await page.waitForFunction(() => /cancelled|done/.test(document.querySelector("#run-title").textContent), null, { timeout: 60000 });
    }

    // A fine-tuning job from the form: the task's fields, a refusal naming its field, then a run.
    await page.click("nav a[data-nav=new]");
    await page.check("#new-form input[name=task][value=text-classification]");
    await page.waitForFunction(() => [...document.querySelectorAll("#cls-fields select[name=model] option")].some((o) => o.value === "seed-run"));
    const form = await page.evaluate(() => {
      const cls = document.querySelector("#cls-fields"), mlm = document.querySelector("#mlm-fields");
      const named = [...cls.elements].filter((e) => e.name);
      return { cls: !cls.hidden && !cls.disabled, mlm: mlm.hidden && mlm.disabled, names: named.map((e) => e.name),
               unlabelled: named.filter((e) => !e.labels.length || !e.labels[0].textContent.trim()).map((e) => e.name),
               models: [...cls.elements.model.options].map((o) => o.value) };
    });
    check(form.cls && form.mlm && ["model", "train", "validation", "test", "text_column", "label_column", "labels", "epochs", "lr", "batch",
          "max_length"].every((n) => form.names.includes(n)) && !form.unlabelled.length && form.models.includes(clsRun),
          "browser_form_cls_fields", JSON.stringify(form));
    await page.fill("#new-form input[name=name]", "browser-cls");
    await page.selectOption("#cls-fields select[name=model]", "seed-run");
    for (const [k, v] of [["train", "banking77/none.csv"], ["test", ""], ["label_column", "category"],
                          ["epochs", "1"], ["lr", "0.001"], ["batch", "16"], ["max_length", "32"]])
      await page.fill(`#cls-fields input[name=${k}]`, v);
    await page.screenshot({ path: path.join(art, "new-cls.png"), fullPage: true });
    await page.click("#new-form button[type=submit]");
    await page.waitForFunction(() => /^422 .*train/.test(document.querySelector("#new-msg").textContent) &&
                                     document.querySelector("#cls-fields input[name=train]").getAttribute("aria-invalid") === "true");
    check(true, "browser_form_cls_refusal", "");
    await page.fill("#cls-fields input[name=train]", "banking77/train.csv");
    // "More options" are sent when filled: a refusal of one opens them and marks it.
    const moreClosed = await page.$eval("#cls-fields details.more", (d) => !d.open);
    await page.click("#cls-fields details.more summary");
    await page.fill("#cls-fields input[name=classifier_dropout]", "1");
    await page.fill("#cls-fields input[name=label_smoothing]", "0.1");
    await page.fill("#cls-fields input[name=hidden_dropout_prob]", "0");
    await page.screenshot({ path: path.join(art, "new-cls-more.png"), fullPage: true });
    await page.click("#cls-fields details.more summary");
    await page.click("#new-form button[type=submit]");
    await page.waitForFunction(() => /^422 .*classifier_dropout/.test(document.querySelector("#new-msg").textContent) &&
                                     document.querySelector("#cls-fields input[name=classifier_dropout]").getAttribute("aria-invalid") === "true");
    const moreOpened = await page.$eval("#cls-fields details.more", (d) => d.open);
    check(moreClosed && moreOpened, "browser_form_cls_more_refusal", `closed at first ${moreClosed}, opened by the refusal ${moreOpened}`);
    await page.fill("#cls-fields input[name=classifier_dropout]", "");
    await page.click("#new-form button[type=submit]");
    // Gone to the playground while the job starts: the page stays there (it jumped to the
    // run's page once the job had a run, wherever the user was).
    await page.click("nav a[data-nav=playground]");
    const started = await page.waitForFunction(async () => (await (await fetch("/runs")).json()).some((r) => r.name === "browser-cls"), null,
                                               { timeout: 60000, polling: 200 }).then(() => true).catch(() => false);
    await page.waitForTimeout(1500);
    const stayed = await page.evaluate(() => location.hash);
    check(started && stayed === "#/playground", "browser_form_wait_stops_when_left", `run started ${started}, page at ${stayed}`);
    await page.click("nav a[data-nav=runs]");
    await page.click(rowOf("browser-cls"));
    await page.waitForFunction(() => /^#\/runs\/\d+$/.test(location.hash), null, { timeout: 60000 });
    // The run page showed last (browser-run's) leaves nothing behind: its configuration stood
    // beside this run's title until this run's details came.
    const stale = await page.evaluate(() => [...document.querySelectorAll("#config-table td, #rev-table td")].some((td) => /browser-run/.test(td.textContent)));
    check(!stale, "browser_run_page_drops_the_last_runs_details", "browser-run's configuration or revisions shown on browser-cls's page");
    await page.waitForFunction(() => /done|failed/.test(document.querySelector("#run-title").textContent), null, { timeout: 60000 });
    // The details (configuration) come from GET /runs/{id}, the charts and the confusion from
    // the event stream: each in its own time.
    await page.waitForFunction(() => document.querySelector("#chart-f1").dataset.points > 0 &&
                                     document.querySelectorAll("#confusion-table tbody tr").length > 0 &&
                                     document.querySelectorAll("#config-table tbody tr").length > 0);
    const submitted = await page.evaluate(() => ({ title: document.querySelector("#run-title").textContent,
      f1: +document.querySelector("#chart-f1").dataset.points, conf: document.querySelectorAll("#confusion-table tbody tr").length,
      cfg: Object.fromEntries([...document.querySelectorAll("#config-table tr")].map((t) => [t.cells[0].textContent, t.cells[1].textContent])) }));
    check(/^browser-cls done text classification$/.test(submitted.title) && submitted.f1 === 2 && submitted.conf >= 1 &&
          submitted.cfg["model (base)"] === "seed-run" && submitted.cfg["train"] === "banking77/train.csv" && submitted.cfg["max_length"] === "32" &&
          submitted.cfg["label_smoothing"] === "0.1" && submitted.cfg["hidden_dropout_prob"] === "0" && submitted.cfg["classifier_dropout"] === "null",
          "browser_form_cls_run", JSON.stringify(submitted).slice(0, 300) + " " +
          JSON.stringify(["label_smoothing", "hidden_dropout_prob", "classifier_dropout"].map((k) => [k, submitted.cfg[k]])));
    await page.click("nav a[data-nav=runs]");
    await page.waitForSelector(rowOf("browser-cls") + " .tag");
    check(true, "browser_form_cls_listed", "");

    // The playground: bars for the top k.
    await page.click("nav a[data-nav=playground]");
    await page.waitForFunction(() => document.querySelectorAll("#fill-model option").length > 0);
    // Only masked LMs: the classifier has its own playground (the page offered it here, and
    // picked it first by name, so the first Fill failed).
    const fillModels = await page.$$eval("#fill-model option", (os) => os.map((o) => o.value));
    check(fillModels.includes("seed-run") && !fillModels.some((v) => v.split("@")[0] === clsRun),
          "browser_playground_lists_masked_lms_only", JSON.stringify(fillModels.slice(0, 6)));
    await page.selectOption("#fill-model", "seed-run");
    await page.fill("#fill-form input[name=top_k]", "4");
    await page.click("#fill-form button[type=submit]");
    await page.waitForSelector("#fill-results .mask-card .pred");
    const preds = await page.$$eval("#fill-results .mask-card .pred", (ps) => ps.map((p) => [p.querySelector(".tok").textContent,
      parseFloat(p.querySelector(".fill").style.width), p.querySelector(".seq").textContent]));
    check(preds.length === 4 && preds.every((p, i) => p[1] > 0 && (i === 0 || p[1] <= preds[i - 1][1])) &&
          preds.every((p) => p[2].startsWith("The capital of France is")), "browser_playground_bars", JSON.stringify(preds));
    await page.fill("#fill-form textarea", "no mask here");
    await page.click("#fill-form button[type=submit]");
    await page.waitForFunction(() => /No mask_token/.test(document.querySelector("#fill-msg").textContent));
    check(true, "browser_playground_error", "");
    await page.fill("#fill-form textarea", "The [MASK] of France is [MASK] .");
    await page.click("#fill-form button[type=submit]");
    await page.waitForFunction(() => document.querySelectorAll("#fill-results .mask-card").length === 2);
    check(true, "browser_playground_two_masks", "");
    await page.screenshot({ path: path.join(art, "playground.png"), fullPage: true });

    // The login link: the cookie is HttpOnly and SameSite=Strict, the token leaves the URL.
    await ctx.clearCookies();
    await page.goto(base + "/?token=" + encodeURIComponent(apiToken) + "#/playground");
    const jar = await ctx.cookies(base);
    const c = jar.find((x) => x.name.startsWith("maskd_session_"));
    check(page.url() === base + "/#/playground" && c && c.httpOnly && c.sameSite === "Strict" && c.path === "/" &&
          /^[0-9a-f]{64}$/.test(c.value) && !c.value.includes(apiToken),
          "browser_login_link", `url ${page.url()}, cookie ${JSON.stringify(c)}`);
    const seen = await page.evaluate(() => document.cookie);
    check(!seen.includes("maskd_session"), "browser_cookie_hidden_from_script", seen);
    const cancel = await page.evaluate(async () => (await fetch("/runs/seed-run/cancel",
      { method: "POST", headers: { "Content-Type": "application/json" } })).status);
    check(cancel === 409, "browser_cookie_authenticates", `cancel of a finished run answered ${cancel}, not 409`);

    // A phone: nothing wider than the screen but the scrollable tables.
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [hash, name] of [["#/", "phone-runs"], ["#/runs/1", "phone-run"], ["#/playground", "phone-playground"],
                                ["#/runs/" + clsId, "phone-run-cls"], ["#/new", "phone-new-cls"]]) {
      await page.goto(base + "/" + hash);
      if (name === "phone-new-cls") await page.check("#new-form input[name=task][value=text-classification]");
      await page.waitForTimeout(800);
      const wide = await page.evaluate(() => document.documentElement.scrollWidth);
      check(wide <= 390, "browser_phone_fits:" + name, `page is ${wide}px wide`);
      await page.screenshot({ path: path.join(art, name + ".png"), fullPage: true });
    }
    // The 401 (not logged in, wrong token), 409 (cancel of a finished run), 400 (no
    // mask) and 422 (a missing training file) answers were provoked on purpose; so was the
    // browser's own request for /favicon.ico while it showed the wrong link's JSON 401 instead of the page.
    // 150,000 steps: every chart draws them (spreading them into Math.min's arguments threw
    // "Maximum call stack size exceeded" and left each chart empty), the loss line thinned to
    // at most 2 points for each 640th of the steps, its peaks kept.
    await page.goto(base + "/#/runs/" + longId);
    const drawn = await page.waitForFunction(() => {
      const s = document.querySelector("#chart-loss"), p = s && s.querySelector("polyline");
      return s && +s.dataset.points === 150000 && p &&
        { line: p.getAttribute("points").split(" ").length, lr: +document.querySelector("#chart-lr").dataset.points };
    }, null, { timeout: 30000 }).then((h) => h.jsonValue()).catch((e) => ({ error: String(e).split("\n")[0] }));
    check(drawn.line > 600 && drawn.line <= 1280 && drawn.lr === 150000, "browser_run_charts_150000_steps",
          JSON.stringify(drawn) + " " + errors.join(" | "));
    // A page of another origin the server allows (--allowed-origin): it classifies text
    // with the token, reads the Hub's files and their headers through a redirect, and reads
    // the server's 401; a page of an origin not allowed reads nothing (the fetch fails).
    const app = await ctx.newPage();
    await app.goto(otherApp + "/");
    const cross = await app.evaluate(async ([api, token, model, seed]) => {
      const out = {};
      const tc = await fetch(api + "/text-classification", { method: "POST",
        headers: { "Content-Type": "application/json", "Authorization": "Bearer " + token },
        body: JSON.stringify({ inputs: "my card has still not arrived", model }) });
      out.classify = [tc.status, await tc.json()];
      const cfg = await fetch(api + "/" + seed + "/resolve/main/config.json");
      out.config = [cfg.status, cfg.headers.get("X-Repo-Commit"), (await cfg.json()).model_type];
      const w = await fetch(api + "/" + seed + "/resolve/main/model.safetensors", { headers: { Range: "bytes=0-7" } });
      out.weights = [w.status, w.redirected, w.headers.get("Content-Range"), w.headers.get("ETag"), (await w.arrayBuffer()).byteLength];
      const no = await fetch(api + "/runs", { method: "POST", headers: { "Content-Type": "application/json" }, body: "{}" });
      out.noToken = [no.status, (await no.json()).error];
      return out;
    }, [base, apiToken, clsRun, "seed-run"]).catch((e) => ({ error: String(e) }));
    const tcOk = cross.classify && cross.classify[0] === 200 && Array.isArray(cross.classify[1]) &&
                 typeof cross.classify[1][0].label === "string" && cross.classify[1][0].score > 0;
    check(tcOk && cross.config[0] === 200 && /^[0-9a-f]{40}$/.test(cross.config[1] || "") && cross.config[2] &&
          cross.weights[0] === 206 && cross.weights[1] === true && /^bytes 0-7\/\d+$/.test(cross.weights[2] || "") &&
          cross.weights[3] && cross.weights[4] === 8 && cross.noToken[0] === 401 && /token/.test(cross.noToken[1]),
          "browser_cors_allowed_origin", JSON.stringify(cross));
    const otherHost = otherApp.replace("127.0.0.1", "localhost");
    await app.goto(otherHost + "/");
    const refused = await app.evaluate(async (api) => {
      try { const r = await fetch(api + "/runs"); return "read " + r.status; } catch (e) { return "refused: " + e.name; }
    }, base);
    check(refused === "refused: TypeError", "browser_cors_other_origin_reads_nothing", refused);
    await app.close();
    const unexpected = errors.filter((e) => !/status of (401|400|409|422)/.test(e) && !/status of 404.*\/favicon\.ico$/.test(e));
    check(unexpected.length === 0, "browser_no_js_errors", unexpected.join(" | "));
  } finally {
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

main().then(() => process.exit(failures ? 1 : 0), (e) => {
  console.log("FAIL browser: " + String(e && e.stack || e).split("\n").slice(0, 3).join(" "));
  process.exit(1);
});
