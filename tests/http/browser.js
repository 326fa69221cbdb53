// The page in a real browser: Debian's chromium driven by playwright-core.
//   node tests/http/browser.js BASE_URL ARTIFACT_DIR TOKEN TOKENIZER TRAIN VALID
// Opens the page, sees the runs table, opens a run and its charts, submits a
// small run from the form (refused until logged in: a wrong token, then the right
// one typed into the login form) and watches its progress move, uses the fill-mask
// playground; logs in with the ?token= link (an HttpOnly cookie the page's script
// cannot read); on a laptop-sized and a phone-sized viewport. Prints PASS/FAIL
// lines; screenshots go to ARTIFACT_DIR.
"use strict";
const path = require("path");
const fs = require("fs");
const os = require("os");
const { chromium } = require("playwright-core");

const [base, art, apiToken, tokenizer, train, valid] = process.argv.slice(2);
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

    // Runs table.
    await page.goto(base + "/");
    await page.waitForSelector("#runs-table tbody tr");
    const cells = await page.$$eval("#runs-table tbody tr:first-child td", (tds) => tds.map((t) => t.textContent));
    check(cells.length === 7 && cells[0] === "seed-run" && cells[1] === "done" && cells[2] === "tiny" && cells[3] === "20 / 20" &&
          parseFloat(cells[4]) > 0, "browser_runs_table", JSON.stringify(cells));
    await page.screenshot({ path: path.join(art, "runs.png"), fullPage: true });

    // A run's page: summary, five charts with data, revisions, config.
    await page.click("#runs-table tbody tr:first-child");
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
    await page.screenshot({ path: path.join(art, "run.png"), fullPage: true });

    // Start a run from the form and watch it move.
    await page.click("nav a[data-nav=new]");
    await page.waitForSelector("#view-new:not([hidden])");
    await page.waitForFunction(() => document.querySelector("#new-form").tokenizer.value !== "");
    const pre = await page.$eval("#new-form", (f) => [f.tokenizer.value, f.train.value]);
    check(pre[0] === tokenizer && pre[1] === train, "browser_form_prefilled", JSON.stringify(pre));
    await page.fill("#new-form input[name=name]", "browser-run");
    await page.selectOption("#new-form select[name=config]", "tiny");
    // Long enough that the cancel below always comes before the run's end.
    await page.fill("#new-form input[name=max_steps]", "100000");
    await page.fill("#new-form input[name=batch]", "8");
    await page.selectOption("#new-form select[name=precision]", "bf16");
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
    await page.waitForFunction(() => /cancelled/.test(document.querySelector("#run-title").textContent), null, { timeout: 60000 });
    check(true, "browser_cancel", "");

    // The playground: bars for the top k.
    await page.click("nav a[data-nav=playground]");
    await page.waitForFunction(() => document.querySelectorAll("#fill-model option").length > 0);
    await page.selectOption("#fill-model", "seed-run");
    await page.fill("#fill-form input[name=top_k]", "4");
    await page.click("#fill-form button[type=submit]");
    await page.waitForSelector(".mask-card .pred");
    const preds = await page.$$eval(".mask-card .pred", (ps) => ps.map((p) => [p.querySelector(".tok").textContent,
      parseFloat(p.querySelector(".fill").style.width), p.querySelector(".seq").textContent]));
    check(preds.length === 4 && preds.every((p, i) => p[1] > 0 && (i === 0 || p[1] <= preds[i - 1][1])) &&
          preds.every((p) => p[2].startsWith("The capital of France is")), "browser_playground_bars", JSON.stringify(preds));
    await page.fill("#fill-form textarea", "no mask here");
    await page.click("#fill-form button[type=submit]");
    await page.waitForFunction(() => /No mask_token/.test(document.querySelector("#fill-msg").textContent));
    check(true, "browser_playground_error", "");
    await page.fill("#fill-form textarea", "The [MASK] of France is [MASK] .");
    await page.click("#fill-form button[type=submit]");
    await page.waitForFunction(() => document.querySelectorAll(".mask-card").length === 2);
    check(true, "browser_playground_two_masks", "");
    await page.screenshot({ path: path.join(art, "playground.png"), fullPage: true });

    // The login link: the cookie is HttpOnly and SameSite=Strict, the token leaves the URL.
    await ctx.clearCookies();
    await page.goto(base + "/?token=" + encodeURIComponent(apiToken) + "#/playground");
    const jar = await ctx.cookies(base);
    const c = jar.find((x) => x.name.startsWith("maskd_token_"));
    check(page.url() === base + "/#/playground" && c && c.httpOnly && c.sameSite === "Strict" && c.path === "/",
          "browser_login_link", `url ${page.url()}, cookie ${JSON.stringify(c)}`);
    const seen = await page.evaluate(() => document.cookie);
    check(!seen.includes("maskd_token"), "browser_cookie_hidden_from_script", seen);
    const cancel = await page.evaluate(async () => (await fetch("/runs/seed-run/cancel",
      { method: "POST", headers: { "Content-Type": "application/json" } })).status);
    check(cancel === 409, "browser_cookie_authenticates", `cancel of a finished run answered ${cancel}, not 409`);

    // A phone: nothing wider than the screen but the scrollable tables.
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [hash, name] of [["#/", "phone-runs"], ["#/runs/1", "phone-run"], ["#/playground", "phone-playground"]]) {
      await page.goto(base + "/" + hash);
      await page.waitForTimeout(800);
      const wide = await page.evaluate(() => document.documentElement.scrollWidth);
      check(wide <= 390, "browser_phone_fits:" + name, `page is ${wide}px wide`);
      await page.screenshot({ path: path.join(art, name + ".png"), fullPage: true });
    }
    // The 401 (not logged in, wrong token), 409 (cancel of a finished run) and 400 (no
    // mask) answers were provoked on purpose; so was the browser's own request for
    // /favicon.ico while it showed the wrong link's JSON 401 instead of the page.
    const unexpected = errors.filter((e) => !/status of (401|400|409)/.test(e) && !/status of 404.*\/favicon\.ico$/.test(e));
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
