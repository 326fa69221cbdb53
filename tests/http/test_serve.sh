#!/usr/bin/env bash
# maskd serve over HTTP with curl: a server on 127.0.0.1 with a free port (--port 0),
# bounded by timeout, stopped at the end. Every route with good and bad input; each
# answers its documented status and a JSON error, and the server stays up.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" serve
MASKD=$M tmp=$T
serve_wrap=(timeout 300)

# start [ARGS...]: runs maskd serve in the background and sets base.
start() { serve_start --db "$tmp/maskd.db" "$@"; }
stop() { serve_stop; }

# call METHOD PATH [curl args...]: status into $tmp/status, body into $tmp/body, headers into $tmp/headers.
call() {
  local m=$1 p=$2; shift 2
  curl -s -S --max-time 20 --path-as-is -X "$m" -o "$tmp/body" -D "$tmp/headers" -w '%{http_code}' "$@" "$base$p" >"$tmp/status" 2>"$tmp/curlerr"
}
status_is() { [ "$(cat "$tmp/status")" = "$1" ]; }
# error_is STATUS [SUBSTRING]: the documented error shape {"error": str, "detail": ...}.
error_is() {
  status_is "$1" && python3 - "$tmp/body" "${2:-}" <<'EOF'
import json, sys
b = json.load(open(sys.argv[1]))
assert isinstance(b, dict) and isinstance(b.get("error"), str) and "detail" in b, b
assert sys.argv[2] in b["error"], (sys.argv[2], b["error"])
EOF
}
header_is() { grep -qi "^$1: $2"$'\r'"\?$" "$tmp/headers"; }
healthy() { call GET /healthz && status_is 200; }

# ---- the command line ----
"$MASKD" serve --help >"$tmp/help" 2>&1
ok cli_help grep -q -- '--token' "$tmp/help"
"$MASKD" serve --port 99999 2>"$tmp/e"; rc=$?
ok cli_bad_port test "$rc" -ne 0 -a "$(wc -l <"$tmp/e")" -le 2
"$MASKD" serve --frobnicate 2>"$tmp/e"; rc=$?
ok cli_unknown_option test "$rc" -ne 0
"$MASKD" serve --host localhost --port 0 2>"$tmp/e"; rc=$?
ok cli_host_not_numeric test "$rc" -ne 0 -a -n "$(grep numeric "$tmp/e")"
"$MASKD" serve --port 0 --static "$tmp/nowhere" 2>"$tmp/e"; rc=$?
ok cli_missing_static test "$rc" -ne 0
"$MASKD" serve --port 0 --auth-reads 2>"$tmp/e"; rc=$?
ok cli_auth_reads_needs_token test "$rc" -ne 0

# ---- a server with a token ----
if ! start --token s3cret; then
  fail start "$(cat "$tmp/err")"
  exit 1
fi
pass start
ok binds_loopback grep -q 'http://127.0.0.1:' "$tmp/out"

call GET /healthz
ok healthz bash -c "[ \"\$(cat $tmp/status)\" = 200 ] && python3 -c 'import json,sys; assert json.load(open(\"$tmp/body\"))[\"status\"]==\"ok\"'"
call GET /
ok page_index bash -c "[ \"\$(cat $tmp/status)\" = 200 ] && grep -qi '<!doctype html>' $tmp/body"
ok page_content_type header_is Content-Type 'text/html; charset=utf-8'
for f in app.js style.css; do
  if [ -f static/$f ]; then call GET /$f; ok "static_$f" status_is 200; fi
done
call GET /app.js
[ -f static/app.js ] && ok js_content_type header_is Content-Type 'text/javascript; charset=utf-8'

# Static files stay inside static/: traversal in every spelling is refused.
for p in '/../Makefile' '/%2e%2e/Makefile' '/..%2fMakefile' '/static/../../Makefile' '/.git/config' '/%2e/index.html'; do
  call GET "$p"
  ok "traversal_refused:$p" bash -c "[ \"\$(cat $tmp/status)\" = 400 -o \"\$(cat $tmp/status)\" = 404 ] && ! grep -q 'CFLAGS' $tmp/body"
done
ln -s /etc/passwd static/zz-test-link-$$.txt 2>/dev/null && {
  call GET "/zz-test-link-$$.txt"; rm -f static/zz-test-link-$$.txt
  ok symlink_out_refused bash -c "! grep -q root: $tmp/body"
}

call GET /no/such/route
ok 404_json error_is 404 'not found'
call GET /healthz/extra
ok 404_longer_path error_is 404
call DELETE /healthz
ok 405_json error_is 405 'DELETE'
ok 405_allow header_is Allow 'GET, HEAD'
call POST /metrics -d '{}'
ok 405_post_on_get_route error_is 405
call HEAD /healthz -I
ok head status_is 200

# /metrics: Prometheus text that counts the requests made above by route and status.
call GET /metrics
ok metrics_type header_is Content-Type 'text/plain; version=0.0.4; charset=utf-8'
ok metrics_counts_404 grep -q '^maskd_http_requests_total{route="unmatched",method="GET",status="404"} [1-9]' "$tmp/body"
ok metrics_counts_healthz grep -q '^maskd_http_requests_total{route="/healthz",method="GET",status="200"} [1-9]' "$tmp/body"
ok metrics_fill_histogram grep -q '^maskd_fill_mask_duration_seconds_bucket{le="+Inf"} ' "$tmp/body"
ok metrics_training_gauge grep -q '^maskd_training_tokens_per_second ' "$tmp/body"
ok metrics_kernels_info grep -Eq '^maskd_kernels_info\{isa="(generic|avx2|avx512|avx512bf16)",best="[a-z0-9]+",gemm="[a-z0-9+-]+",gemm_bf16="[a-z0-9+-]+",avx512_bf16="[01]",cpu=".+"\} 1$' "$tmp/body"
# The startup output names the same kernels, before the "listening on" line.
ok serve_prints_kernels grep -Eq '^maskd serve: kernels (generic|avx2|avx512|avx512bf16) \(best [a-z0-9]+, avx512-bf16 (yes|no)\), gemm [a-z0-9+-]+, bf16 gemm [a-z0-9+-]+, CPU .+$' "$T/out"
ok metrics_parse python3 - "$tmp/body" <<'EOF'
import re, sys
for line in open(sys.argv[1]):
    line = line.rstrip("\n")
    if not line or line.startswith("# HELP ") or line.startswith("# TYPE "):
        continue
    assert re.fullmatch(r'[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\\n]|\\[\\"n])*",?)*\})? [-+0-9.eE]+|[-+]?Inf|NaN', line), line
EOF

# A huge body is refused before it is read, and the server stays up.
head -c 3000000 /dev/zero | tr '\0' 'a' >"$tmp/big"
call POST /healthz --data-binary @"$tmp/big"
ok huge_body_refused bash -c "[ \"\$(cat $tmp/status)\" = 413 -o \"\$(cat $tmp/status)\" = 405 ]"
ok up_after_huge_body healthy

# Many concurrent clients, then still healthy.
burst=()
for i in $(seq 20); do curl -s --max-time 20 -o "$tmp/burst.$i" "$base/healthz" & burst+=($!); done
wait "${burst[@]}"
ok burst_all_answered test "$(cat "$tmp"/burst.* | grep -o "\"status\":\"ok\"" | wc -l)" -eq 20
ok up_after_burst healthy

# The store: one connection per handler thread, kept between requests (not one
# per request); a store file removed under the server is opened (created) anew.
for _ in $(seq 10); do call GET /runs; done
kept=$(ls -l "/proc/$(pgrep -P "$pid" | head -1)/fd" 2>/dev/null | grep -c "$tmp/maskd.db\$")
ok store_kept_between_requests test "$kept" -ge 1 -a "$kept" -le 20
rm -f "$tmp/maskd.db" "$tmp/maskd.db-wal" "$tmp/maskd.db-shm"
call GET /runs
ok store_removed_opened_anew bash -c "[ \"\$(cat $tmp/status)\" = 200 ] && [ -f $tmp/maskd.db ]"

# SIGTERM: a clean stop with status 0.
stop
ok sigterm_clean_exit test $? -eq 0

# With --auth-reads even reads need the token; /healthz stays open.
start --token s3cret --auth-reads || fail start_auth_reads "$(cat "$tmp/err")"
call GET /metrics
ok auth_reads_401 error_is 401 'missing'
call GET /metrics -H 'Authorization: Bearer wrong'
ok auth_reads_wrong_token error_is 401 'invalid'
call GET /metrics -H 'Authorization: Bearer s3cret'
ok auth_reads_with_token status_is 200
call GET /healthz
ok auth_reads_healthz_open status_is 200
# The page's own files hold no data: they load, so the page can show its login form (a
# 401 for them left the browser with a JSON error instead of the page).
call GET /
ok auth_reads_page_open status_is 200
[ -f static/app.js ] && { call GET /app.js; ok auth_reads_script_open status_is 200; }
stop
