#!/usr/bin/env bash
# maskd serve under the abuse of issue 11 (findings 2, 5 and 7), each as the attacker's
# request, asserting the refusal and that nothing changed: cross-site POSTs shaped as
# a browser sends them and a DNS-rebinding Host (refused, no job queued); the login
# link and its cookie; 256 slow clients from other loopback addresses dripping header
# bytes (/healthz answers within a second, they are closed at the header deadline);
# one address's flood (refused past its limit); 300 event-stream subscribers (refused
# past the limits with JSON, /healthz answers); 3,000 invented methods (/metrics stays
# small); %00 and non-UTF-8 paths (JSON errors); SIGTERM under each load (prompt, 0).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" serve_abuse
train='' load='' serve_kill=KILL
# On exit the load and the held training process go too (SIGKILL, like the server).
kill_helpers() { [ -n "$load" ] && kill -9 "$load" 2>/dev/null; [ -n "$train" ] && kill -9 "$train" 2>/dev/null; }
at_exit kill_helpers
[ -f "$DATA/train.txt" ] || { fail serve_abuse_setup "$DATA/train.txt missing"; exit 1; }

# A run that stays "running" without costing CPU: a training process, stopped
# (SIGSTOP) once it has started; its event stream stays open.
head -400 "$DATA/train.txt" > "$T/corpus.txt"
{ "$M" tokenizer train --input "$T/corpus.txt" --vocab-size 400 --out "$T/tok.json" &&
  "$M" prepare --quiet --tokenizer "$T/tok.json" --input "$T/corpus.txt" --split train --seq-len 32 --out "$T/shards"; } \
  >"$T/setup.log" 2>&1 || { fail serve_abuse_setup "$(tail -3 "$T/setup.log")"; exit 1; }
"$M" train --db "$T/hub.db" --name held --tokenizer "$T/tok.json" --train "$T/shards" --config tiny --batch 4 \
  --max-steps 1000000 --threads 1 --quiet >"$T/train.log" 2>&1 &
train=$!
held_running() { "$M" runs --db "$T/hub.db" --json 2>/dev/null | grep -q '"status": "running"'; }
wait_until 100 0.1 held_running
kill -STOP "$train"

# start [ARGS...]: maskd serve on a free port, with a token; sets base and port.
start() { serve_start --db "$T/hub.db" --data-dir "$T" --token tk --quiet "$@"; }
# stop_within NAME SECONDS: SIGTERM, then the exit must come in time with status 0.
stop_within() {
  local t0 rc
  t0=$(date +%s.%N)
  kill -TERM "$pid"
  for _ in $(seq $(($2 * 20))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  if kill -0 "$pid" 2>/dev/null; then fail "$1" "still running $2 s after SIGTERM"; kill -9 "$pid"; wait "$pid"; pid=; return; fi
  wait "$pid"; rc=$?; pid=
  [ "$rc" = 0 ] && pass "$1" || fail "$1" "exit status $rc after $($PY -c "import time; print(round(time.time() - $t0, 2))")s: $(tail -2 "$T/err")"
}
# call METHOD PATH [curl args...]: status into $T/status, body into $T/body, headers into $T/headers.
call() {
  local m=$1 p=$2; shift 2
  curl -s --max-time 10 --path-as-is -X "$m" -o "$T/body" -D "$T/headers" -w '%{http_code}' "$@" "$base$p" >"$T/status" 2>/dev/null
}
# refused NAME STATUS [TEXT]: that status and a JSON error containing TEXT.
refused() {
  local got; got=$(cat "$T/status")
  [ "$got" = "$2" ] || { fail "$1" "status $got, not $2: $(head -c 300 "$T/body")"; return; }
  $PY - "$T/body" "${3:-}" <<'EOF' && pass "$1" || fail "$1" "$(head -c 300 "$T/body")"
import json, sys
b = json.load(open(sys.argv[1]))
assert isinstance(b, dict) and isinstance(b.get("error"), str) and "detail" in b, b
assert sys.argv[2] in b["error"], (sys.argv[2], b["error"])
EOF
}
jobs_count() { curl -s --max-time 10 "$base/jobs" | $PY -c 'import json, sys; print(len(json.load(sys.stdin)))'; }

# The new flags refuse what they cannot use, with one line and a non-zero status.
for bad in "--allowed-host evil/path" "--allowed-origin evil.example" "--handler-threads 0" "--header-timeout 0" \
           "--max-streams-per-ip x"; do
  # shellcheck disable=SC2086
  "$M" serve --port 0 --db "$T/hub.db" $bad >/dev/null 2>"$T/e"; rc=$?
  [ "$rc" -ne 0 ] && [ "$(wc -l <"$T/e")" -eq 1 ] && pass "cli_refuses:${bad%% *}" || fail "cli_refuses:${bad%% *}" "status $rc: $(cat "$T/e")"
done

start --header-timeout 3 || { fail serve_abuse_start "$(cat "$T/err")"; exit 1; }
pass serve_abuse_start
run='{"name": "evil", "tokenizer": "tok.json", "train": "shards", "config": "tiny", "max_steps": 5}'

# ---- finding 2: cross-site requests ----
# What a page on http://evil.example can make the user's browser send.
call POST /runs -H 'Origin: http://evil.example' -H 'Sec-Fetch-Site: cross-site' -H 'Content-Type: text/plain' \
  -H 'Authorization: Bearer tk' --data-binary "$run"
refused cross_site_text_plain_refused 403 Origin
call POST /tokenizers -H 'Origin: http://evil.example' -H 'Content-Type: application/x-www-form-urlencoded' \
  --data-binary 'name=x&input=corpus.txt&vocab_size=100'
refused cross_site_form_refused 403 Origin
call POST /runs/held/cancel -H 'Origin: null' -H 'Content-Type: text/plain' --data-binary ''
refused cross_site_null_origin_cancel_refused 403
# Without Origin (an older browser's form, or curl -d): the content type refuses it.
call POST /runs -H 'Authorization: Bearer tk' --data-binary "$run"
refused form_urlencoded_refused 415 application/json
call POST /fill-mask -H 'Content-Type: text/plain' --data-binary '{"inputs": "a [MASK] ."}'
refused fill_mask_text_plain_refused 415
# DNS rebinding: evil.example resolves to 127.0.0.1, so the page is "same-origin" with the API.
call GET /runs -H "Host: evil.example:$port"
refused rebinding_read_refused 403 Host
call POST /runs -H "Host: evil.example:$port" -H "Origin: http://evil.example:$port" -H 'Content-Type: application/json' \
  -H 'Authorization: Bearer tk' --data-binary "$run"
refused rebinding_write_refused 403 Host
# No Host at all (curl -H 'Host:' leaves it out): HTTP/1.1 requires one, and the Host check
# cannot judge what is not there, so it is a 400 even with the token; HTTP/1.0 may omit it.
call POST /runs -H 'Host:' -H 'Content-Type: application/json' -H 'Authorization: Bearer tk' --data-binary "$run"
refused http11_without_host_refused 400 Host
call GET /runs --http1.0 -H 'Host:'
[ "$(cat "$T/status")" = 200 ] && pass http10_without_host_answered || fail http10_without_host_answered "$(cat "$T/status")"
ok_n=$(jobs_count)
[ "$ok_n" = 0 ] && pass cross_site_no_job_queued || fail cross_site_no_job_queued "$ok_n jobs queued"
call GET /runs -H "Host: localhost:$port"
[ "$(cat "$T/status")" = 200 ] && pass localhost_host_answered || fail localhost_host_answered "$(cat "$T/status")"

# The login link `make run` prints: a cookie, then the same URL without the token.
call GET "/?token=tk"
cookie=$(sed -n 's/^Set-Cookie: \([^;]*\);.*\r$/\1/Ip' "$T/headers")
grep -qiE "^Set-Cookie: maskd_session_$port=[0-9a-f]{64}; Path=/; HttpOnly; SameSite=Strict" "$T/headers" && [ "$(cat "$T/status")" = 303 ] &&
  grep -qi '^Location: /'$'\r''$' "$T/headers" && pass login_link_sets_cookie ||
  fail login_link_sets_cookie "$(cat "$T/status") $(tr -d '\r' <"$T/headers" | tr '\n' '|')"
call GET "/?token=nope"
if [ "$(cat "$T/status")" = 401 ] && ! grep -qi '^Set-Cookie' "$T/headers"; then pass login_wrong_token_no_cookie
else fail login_wrong_token_no_cookie "$(cat "$T/status") $(tr -d '\r' <"$T/headers" | tr '\n' '|')"; fi
call POST /jobs/999/cancel -H "Cookie: $cookie" -H 'Content-Type: application/json'
refused cookie_authenticates 404 job
call POST /jobs/999/cancel -H "Cookie: maskd_session_$port=nope" -H 'Content-Type: application/json'
refused wrong_cookie_401 401 cookie
# The cookie is not the token: browsers send it to every port of the host, where any other
# server reads it. The token itself as the cookie's value is no login.
call POST /jobs/999/cancel -H "Cookie: maskd_session_$port=tk" -H 'Content-Type: application/json'
refused token_as_cookie_401 401 cookie

# ---- finding 7: %00, non-UTF-8 paths, invented methods ----
call GET '/runs/held%00x'
refused encoded_nul_400 400 NUL
call POST '/runs/%ff%fe/cancel' -H 'Content-Type: application/json' -H 'Authorization: Bearer tk'
refused non_utf8_path_json_error 400 UTF-8
call DELETE '/runs/%c3%28'
refused non_utf8_delete_json_error 400 UTF-8
call GET '/runs/%e2%82%ac'
refused utf8_run_name_404 404 'no such run'
$PY - "$port" <<'EOF' && pass invented_methods_sent || fail invented_methods_sent "see above"
import http.client, random, string, sys
random.seed(11)
conn = None
for i in range(3000):
    m = "".join(random.choice(string.ascii_uppercase) for _ in range(random.randint(3, 12)))
    for attempt in range(2):
        try:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
            conn.request(m, "/healthz" if i % 2 else "/runs")
            conn.getresponse().read()
            break
        except (http.client.HTTPException, OSError):
            conn = None
EOF
call GET /metrics
size=$(wc -c <"$T/body")
series=$(grep -c '^maskd_http_requests_total{' "$T/body")
[ "$size" -lt 20000 ] && [ "$series" -lt 60 ] && grep -q 'method="other"' "$T/body" && pass metrics_bounded_by_methods ||
  fail metrics_bounded_by_methods "$size bytes, $series series"

# ---- finding 5: slow clients, one address's flood, event streams ----
# 256 slow clients from 127.0.0.2-9 each send a header byte every 2 s (MHD's idle
# timer never fires); /healthz from 127.0.0.1 answers within a second all along,
# and each slow client is closed at the 3 s header deadline.
$PY - "$port" <<'EOF' && pass slow_clients_closed_at_deadline || fail slow_clients_closed_at_deadline "see above"
import socket, sys, time, select, urllib.request
port = int(sys.argv[1])
socks, opened = [], {}
for i in range(256):
    s = socket.socket()
    s.bind((f"127.0.0.{2 + i % 8}", 0))
    s.connect(("127.0.0.1", port))
    s.setblocking(False)
    s.send(b"GET /runs HTTP/1.1\r\n")
    socks.append(s)
    opened[s] = time.time()
closed, worst, text = {}, 0.0, b"X-Slow: " + b"a" * 60
t0, last = time.time(), 0.0
while len(closed) < len(socks) and time.time() - t0 < 12:
    if time.time() - last >= 2:
        last = time.time()
        for k, s in enumerate(socks):
            if s not in closed:
                try: s.send(text[k % len(text):k % len(text) + 1])
                except OSError: closed[s] = time.time()
    t = time.time()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
        assert r.status == 200
    worst = max(worst, time.time() - t)
    r, _, _ = select.select([s for s in socks if s not in closed], [], [], 0.2)
    for s in r:
        try:
            if not s.recv(100): closed[s] = time.time()
        except OSError:
            closed[s] = time.time()
kept = sorted(closed[s] - opened[s] for s in closed)
print(f"# {len(closed)} of 256 closed, kept {kept[0]:.1f}-{kept[-1]:.1f}s, /healthz at worst {worst * 1000:.0f} ms" if kept else "# none closed")
ok = len(closed) == 256 and kept[0] > 2.5 and kept[-1] < 6 and worst < 1.0
sys.exit(0 if ok else 1)
EOF
# One address opens 200 connections: past its 128 it is refused at once, others are served.
$PY - "$port" <<'EOF' && pass one_address_flood_limited || fail one_address_flood_limited "see above"
import socket, sys, time, urllib.request
port = int(sys.argv[1])
socks = []
for i in range(200):
    s = socket.socket()
    s.bind(("127.0.0.10", 0))
    s.connect(("127.0.0.1", port))
    socks.append(s)
time.sleep(0.3)
shut = 0
for s in socks:
    s.setblocking(False)
    try:
        shut += s.recv(1) == b""
    except BlockingIOError:
        pass
    except OSError:
        shut += 1
t = time.time()
with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
    ok = r.status == 200 and time.time() - t < 1.0
print(f"# {shut} of 200 refused, /healthz {(time.time() - t) * 1000:.0f} ms")
sys.exit(0 if ok and shut == 72 else 1)
EOF
# 300 subscribers to a running run's events, 20 from each of 15 addresses: 16 per
# address (429 past it), 64 in all (503 past it), each refusal a JSON error.
$PY - "$port" >"$T/streams.log" <<'EOF' && pass stream_limits || fail stream_limits "$(cat "$T/streams.log")"
import json, socket, sys, time, urllib.request
port = int(sys.argv[1])
held, codes = [], {}
for a in range(15):
    for i in range(20):
        s = socket.socket()
        s.bind((f"127.0.0.{20 + a}", 0))
        s.connect(("127.0.0.1", port))
        s.settimeout(5)
        s.send(f"GET /runs/held/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            b = s.recv(4096)
            if not b: break
            head += b
        code = int(head.split(b" ")[1]) if head else 0
        codes[code] = codes.get(code, 0) + 1
        if code == 200:
            held.append((s, head.split(b"\r\n\r\n", 1)[1]))
        else:
            body = head.split(b"\r\n\r\n", 1)[1]
            n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
            while len(body) < n: body += s.recv(4096)
            err = json.loads(body)
            assert isinstance(err.get("error"), str) and "detail" in err, err
            s.close()
t = time.time()
with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
    health = r.status == 200 and time.time() - t < 1.0
# The held streams see the run's progress, then keep-alive comments.
got = held[0][1] if held else b""
while held and b"progress" not in got and len(got) < 65536:
    got += held[0][0].recv(4096)
print(f"# answers {codes}, /healthz {(time.time() - t) * 1000:.0f} ms, first event {got[:40]!r}")
ok = codes == {200: 64, 429: 16, 503: 220} and health and b"progress" in got
for s, _ in held: s.close()
sys.exit(0 if ok else 1)
EOF
# The slots come back once the subscribers have gone (noticed at the next keep-alive).
for _ in $(seq 40); do
  curl -s --max-time 2 -o /dev/null -w '%{http_code}' "$base/runs/held/events" 2>/dev/null | grep -q 200 && break
  sleep 0.25
done
code=$(curl -s --max-time 1 -o /dev/null -w '%{http_code}' "$base/runs/held/events" 2>/dev/null)
[ "$code" = 200 ] && pass stream_slots_released || fail stream_slots_released "status $code"
stop_within sigterm_clean 5

# ---- SIGTERM under each load: prompt, status 0 ----
# unload: ends the background client that made the load.
unload() { kill "$load" 2>/dev/null; wait "$load" 2>/dev/null; load=; return 0; }
start --header-timeout 30 || fail abuse_restart "$(cat "$T/err")"
$PY - "$port" <<'EOF' &
import socket, sys, time
socks = []
for i in range(256):
    s = socket.socket(); s.bind((f"127.0.0.{2 + i % 8}", 0)); s.connect(("127.0.0.1", int(sys.argv[1])))
    s.send(b"GET /runs HTTP/1.1\r\nX-Slow: a"); socks.append(s)
time.sleep(8)
EOF
load=$!
sleep 1
stop_within sigterm_with_slow_clients 3
unload

start || fail abuse_restart "$(cat "$T/err")"
$PY - "$port" <<'EOF' &
import socket, sys, time
socks = []
for i in range(60):
    s = socket.socket(); s.bind((f"127.0.0.{40 + i % 4}", 0)); s.connect(("127.0.0.1", int(sys.argv[1])))
    s.send(f"GET /runs/held/events HTTP/1.1\r\nHost: 127.0.0.1:{sys.argv[1]}\r\n\r\n".encode()); socks.append(s)
time.sleep(8)
EOF
load=$!
sleep 1.5
stop_within sigterm_with_streams_open 3
unload

# One handler thread and 300 requests at once: most are queued when SIGTERM comes.
start --handler-threads 1 || fail abuse_restart "$(cat "$T/err")"
$PY - "$port" <<'EOF' &
import socket, sys, time
socks = []
for i in range(300):
    s = socket.socket(); s.bind((f"127.0.0.{60 + i % 4}", 0)); s.connect(("127.0.0.1", int(sys.argv[1])))
    s.send(f"GET /runs HTTP/1.1\r\nHost: 127.0.0.1:{sys.argv[1]}\r\n\r\n".encode()); socks.append(s)
time.sleep(8)
EOF
load=$!
sleep 0.3
stop_within sigterm_with_requests_queued 3
unload
