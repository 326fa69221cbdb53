#!/usr/bin/env bash
# Corpus uploads (POST /corpora?name=NAME, server/app/routes_corpora.c, over the HTTP
# layer's HTTP_UPLOAD streaming): a WikiText-2 file uploaded byte for byte, with the
# sha256 sha256sum gives, listed by GET /corpora, trained on by a tokenizer job; every
# refusal with its status (409 a name taken, 415 another type, 422 a bad name or a body
# that is not UTF-8 text, 401 without the token, 413 past --max-upload by Content-Length
# and chunked) leaving nothing in corpora/ or uploads/; GET /corpora/NAME; a client gone
# mid-body leaves no file and the server serving; two uploads of one name at once: one
# 201, one 409; 300 MB streamed through with the server's peak memory far below it; a
# write that fails (ulimit -f) answers 500 naming why and leaves nothing.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" serve_upload
need upload_setup "$DATA/valid.txt missing (MASKD_DATA)" -f "$DATA/valid.txt"

mkdir -p "$T/data"
printf 'a corpus the operator put here\n' > "$T/data/taken.txt"
W=$T/work
start() { serve_start --db "$T/db" --data-dir "$T/data" --work-dir "$W" --token tk --quiet "$@"; }
# up NAME [CURL ARGS...]: POST /corpora?name=NAME with the token; status to $T/status, body to $T/body.
up() {
  local name=$1; shift
  curl -s --max-time 60 -X POST -H 'Authorization: Bearer tk' -o "$T/body" -w '%{http_code}' "$@" \
    "$base/corpora?name=$name" >"$T/status" 2>/dev/null
}
bin='Content-Type: application/octet-stream'
# Nothing but the given corpora in corpora/ (and their .NAME.sha256), nothing in uploads/.
clean() {
  [ "$(ls "$W/corpora" | tr '\n' ' ')" = "${1:-}" ] && [ -z "$(ls -A "$W/uploads")" ] &&
    [ -z "$(ls -A "$W/corpora" | grep -v '^\.[^/]*\.sha256$' | grep '^\.')" ]
}

start || { fail upload_start "$(cat "$T/err")"; exit 1; }

# ---- a corpus, byte for byte ----
up wiki-valid -H "$bin" --data-binary @"$DATA/valid.txt"
ok upload_created status_is 201
sum=$(sha256sum "$DATA/valid.txt" | cut -d' ' -f1)
ok upload_answer $PY - "$T/body" "$sum" "$(stat -c %s "$DATA/valid.txt")" <<'EOF'
import json, sys
b = json.load(open(sys.argv[1]))
assert b == {"name": "wiki-valid", "bytes": int(sys.argv[3]), "sha256": sys.argv[2], "uploaded": True}, b
EOF
curl -s -D "$T/headers" -o /dev/null -X POST -H 'Authorization: Bearer tk' -H "$bin" --data-binary 'x y z' \
  "$base/corpora?name=small_1.txt"
ok upload_location grep -qi '^Location: /corpora/small_1.txt' "$T/headers"
ok upload_identical cmp -s "$DATA/valid.txt" "$W/corpora/wiki-valid"
ok upload_sha256 test "$(sha256sum "$W/corpora/wiki-valid" | cut -d' ' -f1)" = "$sum"
ok upload_private test "$(stat -c %a "$W/corpora/wiki-valid")" = 600
ok upload_no_temp_left clean 'small_1.txt wiki-valid '
curl -s --max-time 10 -o "$T/body" "$base/corpora"
ok corpora_lists_both $PY - "$T/body" "$(stat -c %s "$DATA/valid.txt")" <<'EOF'
import json, sys
b = {c["name"]: c for c in json.load(open(sys.argv[1]))}
assert b["wiki-valid"] == {"name": "wiki-valid", "bytes": int(sys.argv[2]), "uploaded": True}, b
assert b["taken.txt"] == {"name": "taken.txt", "bytes": 31, "uploaded": False}, b
assert b["small_1.txt"]["uploaded"] is True, b
EOF
curl -s --max-time 10 -o "$T/body" "$base/corpora/wiki-valid"
ok corpus_get_upload test "$(jget '(b["name"], b["bytes"], b["uploaded"], b["sha256"])')" = "('wiki-valid', $(stat -c %s "$DATA/valid.txt"), True, '$sum')"
curl -s --max-time 10 -o "$T/body" "$base/corpora/taken.txt"
ok corpus_get_data_root test "$(jget 'b')" = "{'name': 'taken.txt', 'bytes': 31, 'uploaded': False}"
curl -s --max-time 10 -o "$T/body" -w '%{http_code}' "$base/corpora/nothing" >"$T/status"
ok corpus_get_missing_404 error_is 404 nothing
ok healthz_shows_max_upload test "$(curl -s "$base/healthz" | $PY -c 'import json,sys; print(json.load(sys.stdin)["limits"]["upload"]["max_bytes"])')" = 1073741824

# ---- a tokenizer job on it ----
curl -s --max-time 10 -o "$T/body" -w '%{http_code}' -X POST -H 'Authorization: Bearer tk' -H 'Content-Type: application/json' \
  --data-binary '{"name": "t", "input": "wiki-valid", "vocab_size": 500}' "$base/tokenizers" >"$T/status"
ok tokenizer_job_accepted status_is 202
job=$(jget 'b["id"]' 2>/dev/null)
job_done() {
  curl -s --max-time 10 -o "$T/body" "$base/jobs/$job"
  [ "$(jget 'b["status"]' 2>/dev/null)" = done ] || { [ "$(jget 'b["status"]' 2>/dev/null)" = failed ] && return 2; return 1; }
}
job_finished() { job_done; [ $? != 1 ]; }
wait_until 300 0.2 job_finished
ok tokenizer_job_on_upload job_done
ok tokenizer_job_output test -s "$W/tokenizers/t/tokenizer.json"

# ---- refusals, each leaving nothing behind ----
up wiki-valid -H "$bin" --data-binary 'other text'
ok name_taken_by_upload error_is 409 wiki-valid
up taken.txt -H "$bin" --data-binary 'other text'
ok name_taken_by_data_root error_is 409 taken.txt
up fresh -H 'Content-Type: text/plain' --data-binary 'text'
ok wrong_type_415 error_is 415 application/octet-stream
up fresh --data-binary 'text'
ok form_type_415 error_is 415 application/octet-stream
for bad in '../x' '.x' 'a%2Fb' "$(printf 'a%.0s' $(seq 65))" '-x' ''; do
  up "$bad" -H "$bin" --data-binary 'text'
  ok "bad_name_422_${bad:0:8}" error_is 422 name
done
printf 'some text\0with a NUL' > "$T/nul.txt"
up fresh -H "$bin" --data-binary @"$T/nul.txt"
ok nul_byte_422 error_is 422 '"offset": 9'
printf 'caf\xc3\xa9 ok, then \xff here' > "$T/bad.txt"
up fresh -H "$bin" --data-binary @"$T/bad.txt"
ok invalid_utf8_422 error_is 422 '"offset": 15'
printf 'ends inside \xe2\x96' > "$T/cut.txt"
up fresh -H "$bin" --data-binary @"$T/cut.txt"
ok cut_utf8_422 error_is 422 '"offset": 12'
printf 'overlong \xc0\xaf' > "$T/over.txt"
up fresh -H "$bin" --data-binary @"$T/over.txt"
ok overlong_utf8_422 error_is 422 '"offset": 9'
up fresh -H "$bin" --data-binary ''
ok empty_body_422 error_is 422 empty
not_said() { ! grep -qF -- "$1" "$T/body"; }
# A last byte that leads no character is not UTF-8 at its offset, not a character cut short.
for b in ff c0 c1 f5; do
  printf "last byte \\x$b" > "$T/last.txt"
  up fresh -H "$bin" --data-binary @"$T/last.txt"
  ok "no_lead_last_byte_${b}_422" error_is 422 '"offset": 10'
  ok "no_lead_last_byte_${b}_not_cut_short" not_said 'inside a character'
done
printf 'a surrogate \xed\xa0\x80' > "$T/sur.txt"
up fresh -H "$bin" --data-binary @"$T/sur.txt"
ok surrogate_422 error_is 422 '"offset": 12'
printf 'past U+10FFFF \xf4\x90\x80\x80' > "$T/past.txt"
up fresh -H "$bin" --data-binary @"$T/past.txt"
ok past_max_code_point_422 error_is 422 '"offset": 14'
# Characters across the 1 MiB pieces the check reads: a 2-byte one at the boundary, a
# 4-byte one across it, both valid.
{ head -c 1048575 /dev/zero | tr '\0' a; printf '\xc3\xa9'; head -c 1048573 /dev/zero | tr '\0' b; printf '\xf0\x9f\x98\x80 end\n'; } > "$T/straddle.txt"
up straddle -H "$bin" --data-binary @"$T/straddle.txt"
ok utf8_across_read_pieces_201 status_is 201
rm -f "$W/corpora/straddle" "$W/corpora/.straddle.sha256"
# An invalid sequence across the boundary is found at its first byte.
{ head -c 1048575 /dev/zero | tr '\0' a; printf '\xe2\x28\xa1 end\n'; } > "$T/straddle-bad.txt"
up straddle -H "$bin" --data-binary @"$T/straddle-bad.txt"
ok invalid_utf8_across_read_pieces_422 error_is 422 '"offset": 1048575'
curl -s -o "$T/body" -w '%{http_code}' -X POST -H "$bin" --data-binary 'text' "$base/corpora?name=fresh" >"$T/status"
ok no_token_401 error_is 401 token
curl -s -o "$T/body" -w '%{http_code}' -X POST -H 'Authorization: Bearer wrong' -H "$bin" --data-binary 'text' \
  "$base/corpora?name=fresh" >"$T/status"
ok wrong_token_401 error_is 401 token
ok refusals_leave_nothing clean 'small_1.txt wiki-valid '

# ---- a client gone mid-body; two uploads of one name at once ----
ok client_gone_mid_body $PY - "$port" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /corpora?name=gone HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nAuthorization: Bearer tk\r\n"
          b"Content-Type: application/octet-stream\r\nContent-Length: 10000000\r\n\r\n" % sys.argv[1].encode())
s.sendall(b"half a body " * 10000)
s.close()
EOF
gone_clean() { clean 'small_1.txt wiki-valid '; }
ok client_gone_no_temp_left wait_until 50 0.1 gone_clean
ok serving_after_gone_client test "$(curl -s -o /dev/null -w '%{http_code}' "$base/corpora")" = 200
# A client that sends the whole body and then closes its side is answered all the same.
ok half_closed_after_body_answered $PY - "$port" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
body = b"all of the body\n" * 1000
s.sendall(b"POST /corpora?name=halfclosed HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nAuthorization: Bearer tk\r\n"
          b"Content-Type: application/octet-stream\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % (sys.argv[1].encode(), len(body)) + body)
s.shutdown(socket.SHUT_WR)
s.settimeout(10)
got = b""
while True:
    d = s.recv(65536)
    if not d: break
    got += d
assert got.startswith(b"HTTP/1.1 201"), got[:200]
EOF
rm -f "$W/corpora/halfclosed"
racers=()
for i in 1 2; do
  curl -s -o "$T/race$i" -w '%{http_code}' -X POST -H 'Authorization: Bearer tk' -H "$bin" --data-binary @"$DATA/valid.txt" \
    "$base/corpora?name=raced" >"$T/race$i.status" &
  racers+=($!)
done
wait "${racers[@]}"  # not a bare wait: the server is a background job too
ok same_name_at_once_one_wins test "$(sort "$T/race1.status" "$T/race2.status" | tr '\n' ' ')" = '201 409 '
ok same_name_at_once_intact cmp -s "$DATA/valid.txt" "$W/corpora/raced"

# ---- 300 MB streamed: the server's peak memory stays far below it ----
kb() { awk -v k="$2" '$1 == k ":" {print $2}' "/proc/$1/status"; }
hwm0=$(kb "$pid" VmHWM)
# -T - streams stdin (chunked), so curl holds none of it either.
yes 'the quick brown fox jumps over the lazy dog' | head -c 300000000 |
  curl -s --max-time 120 -X POST -T - -H 'Authorization: Bearer tk' -H "$bin" -o "$T/body" -w '%{http_code}' \
    "$base/corpora?name=big" >"$T/status"
hwm1=$(kb "$pid" VmHWM)
ok big_upload_created status_is 201
ok big_upload_size test "$(stat -c %s "$W/corpora/big" 2>/dev/null)" = 300000000
ok big_upload_sha256 test "$(jget 'b["sha256"]')" = "$(yes 'the quick brown fox jumps over the lazy dog' | head -c 300000000 | sha256sum | cut -d' ' -f1)"
grew=$((hwm1 - hwm0))
[ "$grew" -lt 122880 ] && pass big_upload_memory_bounded || fail big_upload_memory_bounded "VmHWM grew by $grew kB"
rm -f "$W/corpora/big"
serve_stop && pass upload_server_stops_cleanly || fail upload_server_stops_cleanly "exit status $?: $(tail -3 "$T/err")"

# ---- --max-upload: 413 by Content-Length at once, and for a chunked body past it ----
start --max-upload 1000 || { fail upload_small_start "$(cat "$T/err")"; exit 1; }
head -c 5000 "$DATA/valid.txt" > "$T/5k.txt"
up over -H "$bin" --data-binary @"$T/5k.txt"
ok too_large_413 error_is 413 '"max_bytes": 1000'
up over -H "$bin" -H 'Transfer-Encoding: chunked' --data-binary @"$T/5k.txt"
ok too_large_chunked_413 error_is 413 '"max_bytes": 1000'
yes 'ascii text' | head -c 1000 > "$T/1k.txt"
up exact -H "$bin" --data-binary @"$T/1k.txt"
ok at_the_limit_201 status_is 201
ok too_large_leaves_nothing clean 'exact raced small_1.txt wiki-valid '
serve_stop && pass small_server_stops_cleanly || fail small_server_stops_cleanly "exit status $?: $(tail -3 "$T/err")"

# ---- a write that fails (the file-size limit stands in for a full disk): 500 naming why ----
serve_wrap=(bash -c 'ulimit -f 2048; exec "$@"' _)
start || { fail upload_limited_start "$(cat "$T/err")"; exit 1; }
yes 'ascii text' | head -c 3000000 > "$T/3m.txt"
up too-big-for-disk -H "$bin" --data-binary @"$T/3m.txt"
ok write_failure_500 error_is 500 'File too large'
ok write_failure_leaves_nothing clean 'exact raced small_1.txt wiki-valid '
up fits -H "$bin" --data-binary @"$T/1k.txt"
ok serving_after_write_failure status_is 201
serve_stop
serve_wrap=()
