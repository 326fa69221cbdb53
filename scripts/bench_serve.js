// Closed-loop HTTP load: C clients, each sending the next request when the last
// answered, for S seconds, against one URL on 127.0.0.1 only.
//   node scripts/bench_serve.js URL CONCURRENCY SECONDS BODY_JSON [LATENCIES_FILE]
// Sends Content-Type: application/json, and Authorization: Bearer $BENCH_TOKEN when set.
// Prints one JSON line: {concurrency, requests, errors, connections, rps, p50_ms, p90_ms,
// p99_ms, max_ms}; connections counts the TCP connections opened (keep-alive: one per
// client unless the server closed some). With LATENCIES_FILE, every answered request's
// latency in ms is written there, one per line, for pooling rounds.
"use strict";
const http = require("http");
const fs = require("fs");
const [url, conc, secs, body, latFile] = process.argv.slice(2);
const u = new URL(url);
if (u.hostname !== "127.0.0.1" && u.hostname !== "localhost") { console.error("bench_serve: 127.0.0.1 only"); process.exit(2); }
const C = parseInt(conc, 10), S = parseFloat(secs);
const agent = new http.Agent({ keepAlive: true, maxSockets: C });
const headers = { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) };
if (process.env.BENCH_TOKEN) headers.Authorization = `Bearer ${process.env.BENCH_TOKEN}`;
const lat = [];
const seen = new WeakSet();
let errors = 0, firstError = "", connections = 0;
const t0 = process.hrtime.bigint(), end = t0 + BigInt(Math.round(S * 1e9));
function one() {
  return new Promise((resolve) => {
    const s = process.hrtime.bigint();
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: "POST", agent, headers },
      (res) => {
        let n = 0;
        res.on("data", (d) => (n += d.length));
        res.on("end", () => {
          if (res.statusCode !== 200 || n === 0) { errors++; firstError ||= `status ${res.statusCode}`; }
          else lat.push(Number(process.hrtime.bigint() - s) / 1e6);
          resolve();
        });
      });
    req.on("socket", (sock) => { if (!seen.has(sock)) { seen.add(sock); connections++; } });
    req.setTimeout(60000, () => req.destroy(new Error("timeout")));
    req.on("error", (e) => { errors++; firstError ||= e.message; resolve(); });
    req.end(body);
  });
}
async function client() { while (process.hrtime.bigint() < end) await one(); }
Promise.all(Array.from({ length: C }, client)).then(() => {
  const wall = Number(process.hrtime.bigint() - t0) / 1e9;
  if (latFile) fs.writeFileSync(latFile, lat.map((x) => x.toFixed(3)).join("\n") + (lat.length ? "\n" : ""));
  lat.sort((a, b) => a - b);
  const q = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : null);
  const r = (x) => (x == null ? null : Math.round(x * 10) / 10);
  console.log(JSON.stringify({ concurrency: C, requests: lat.length, errors, first_error: firstError || undefined,
    connections, rps: Math.round((lat.length / wall) * 10) / 10, p50_ms: r(q(0.5)), p90_ms: r(q(0.9)),
    p99_ms: r(q(0.99)), max_ms: r(lat[lat.length - 1]) }));
  agent.destroy();
});
