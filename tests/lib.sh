# The opening of every script test (tests/GROUP/test_*.sh, tests/long/long_*.sh):
#   . "$(dirname "$0")/../lib.sh" NAME [DATA-ROOT]
# moves to the repository root (every relative path in a test is from there), turns on
# `set -u`, and sets
#   M          the maskd binary: $MASKD, else build/maskd (absolute)
#   DATA_ROOT  the data folder: DATA-ROOT, else $MASKD_DATA, else ../shared/data
#   DATA       its WikiText-2 folder ($DATA_ROOT/wikitext-2)
#   T          a private temporary folder under $MASKD_TMP (else /tmp), removed on exit;
#              a test that sets lib_keep=DIR before sourcing works in DIR and keeps it
#   PY         /usr/bin/python3, the interpreter the references run in
# and runs with the environment maskd is measured in (no OPENBLAS_CORETYPE or
# OPENBLAS_L2_SIZE, passive OpenMP waits). Helpers:
#   pass NAME, fail NAME WHY   one check's line, in the format tests/run counts
#   ok NAME COMMAND...         PASS when COMMAND succeeds, else FAIL with the last HTTP
#                              answer ($T/body and $T/status, as call/post leave them)
#   need NAME WHY TEST...      when `test TEST...` is false: FAIL NAME WHY and exit 1
#   wait_until TRIES SECONDS COMMAND...
#                              runs COMMAND until it succeeds, at most TRIES times, SECONDS
#                              apart; its status is COMMAND's last
#   serve_start ARGS...        `$M serve --port 0 ARGS` in the background (after the words
#                              in the array serve_wrap, e.g. serve_wrap=(timeout 600)),
#                              stdout to $T/out, stderr to $T/err (appended across starts
#                              when serve_keep_err=1); waits up to 10 s for its
#                              "listening on" line or its exit; sets pid, base
#                              (http://127.0.0.1:PORT) and port; status 1 if none came
#   serve_stop                 SIGTERM to the server, waits; its exit status
# and for the server's answers (a test may define its own call() after sourcing):
#   call METHOD PATH [CURL-ARGS...]
#                              a request to $base, JSON content type: the status code
#                              into $T/status, the body into $T/body
#   status_is CODE             the last answer's status is CODE
#   error_is CODE [TEXT]       ... and its body the documented error, {"error": str,
#                              "detail": ...}, whose JSON holds TEXT
#   jget EXPR                  prints the Python expression EXPR over the body `b`
#   body_holds PATH EXPR       GET PATH, and EXPR over its body is true
#   wait_for SECONDS PATH EXPR polls body_holds every 0.2 s, at most SECONDS
#   at_exit COMMAND            eval'd on exit, before the rest of the clean-up
# On exit (the trap is lib.sh's: add to it with at_exit, never replace it): the at_exit
# commands in order, then a server still in $pid is sent $serve_kill (TERM unless the
# test sets it) and every background job waited for, then (under MASKD_SANITIZER_LOGS)
# a FAIL for each sanitizer report, then $T is removed.
# shellcheck disable=SC2034  # the variables set here are the tests' to use
set -u
lib_data=${2:-}   # a data folder given on the command line is the caller's, relative to where it ran
[ -n "$lib_data" ] && [ "${lib_data#/}" = "$lib_data" ] && lib_data=$PWD/$lib_data
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
M=${MASKD:-$PWD/build/maskd}
DATA_ROOT=${lib_data:-${MASKD_DATA:-../shared/data}}
DATA=$DATA_ROOT/wikitext-2
PY=/usr/bin/python3
if [ -n "${lib_keep:-}" ]; then
  T=$lib_keep; mkdir -p "$T"
else
  T=$(mktemp -d "${MASKD_TMP:-/tmp}/$1.XXXXXX")
fi
# Without its folder a test would write its files relative to / (every path is "$T/...").
if [ -z "$T" ] || [ ! -d "$T" ]; then
  echo "FAIL ${1}_setup: no temporary folder under ${MASKD_TMP:-/tmp} (does it exist?)"
  exit 1
fi
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
export OMP_WAIT_POLICY=PASSIVE
# Under the sanitizer build (MASKD_SANITIZER_LOGS=1: tests/run --asan runs some script tests
# with it) every process's ASan, LeakSanitizer and UBSan report goes to a file in
# $T/sanitizer, whatever the test does with its stderr, and any report fails the test at exit.
if [ -n "${MASKD_SANITIZER_LOGS:-}" ]; then
  mkdir -p "$T/sanitizer"
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:log_path=$T/sanitizer/asan"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}:log_path=$T/sanitizer/ubsan"
fi

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
ok() { local name=$1; shift; if "$@"; then pass "$name"; else fail "$name" "$(tail -c 400 "$T/body" 2>/dev/null) (status $(cat "$T/status" 2>/dev/null))"; fi; }
need() { local name=$1 why=$2; shift 2; test "$@" || { fail "$name" "$why"; exit 1; }; }

wait_until() {
  local tries=$1 delay=$2 i; shift 2
  for ((i = 1; ; i++)); do
    "$@" && return 0
    [ "$i" -ge "$tries" ] && return 1
    sleep "$delay"
  done
}

pid='' base='' port='' serve_wrap=() serve_keep_err=0 serve_kill=TERM
serve_start() {
  # Emptied here, not only by the redirection: that happens in the child, after this
  # shell may already have found an earlier server's "listening on" line in the old file.
  : >"$T/out"
  [ "$serve_keep_err" = 1 ] || : >"$T/err"
  "${serve_wrap[@]}" "$M" serve --port 0 "$@" >"$T/out" 2>>"$T/err" &
  pid=$!
  for _ in $(seq 100); do
    grep -q 'listening on' "$T/out" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  base=$(sed -n 's|.*listening on \(http://[^ ]*\)/$|\1|p' "$T/out")
  port=${base##*:}
  [ -n "$base" ]
}
serve_stop() { kill -TERM "$pid" 2>/dev/null; wait "$pid"; local rc=$?; pid=; return $rc; }

call() {
  local m=$1 p=$2; shift 2
  curl -s --max-time 60 -X "$m" -H 'Content-Type: application/json' -o "$T/body" -w '%{http_code}' "$@" "$base$p" >"$T/status" 2>/dev/null
}
status_is() { [ "$(cat "$T/status")" = "$1" ]; }
error_is() {
  status_is "$1" && $PY - "$T/body" "${2:-}" <<'EOF'
import json, sys
b = json.load(open(sys.argv[1]))
assert isinstance(b, dict) and isinstance(b.get("error"), str) and "detail" in b, b
assert sys.argv[2] in json.dumps(b, ensure_ascii=False), (sys.argv[2], b)
EOF
}
jget() { $PY -c "import json,sys; b=json.load(open('$T/body')); print($1)"; }
body_holds() { call GET "$1"; [ "$(jget "bool($2)" 2>/dev/null)" = True ]; }
wait_for() { wait_until $(($1 * 5)) 0.2 body_holds "$2" "$3"; }

# A small training setup in $T from WikiText-2's first BYTES bytes (train; valid: its first
# 30000): a 300-piece tokenizer ($T/tok.json), seq-32 shards ($T/train, $T/valid) and a
# 16-wide 2-layer RoBERTa with dropout ($T/cfg.json). Fails the named test when it cannot.
small_training_setup() {
  local name=$1 bytes=$2
  head -c "$bytes" "$DATA/train.txt" > "$T/tr.txt"
  head -c 30000 "$DATA/valid.txt" > "$T/va.txt"
  "$M" tokenizer train --input "$T/tr.txt" --vocab-size 300 --out "$T/tok.json" --threads 1 >/dev/null 2>&1 &&
  "$M" prepare --tokenizer "$T/tok.json" --input "$T/tr.txt" --split train --seq-len 32 --out "$T/train" --quiet >/dev/null 2>&1 &&
  "$M" prepare --tokenizer "$T/tok.json" --input "$T/va.txt" --split validation --seq-len 32 --out "$T/valid" --quiet >/dev/null 2>&1 ||
    { fail "$name" "tokenizer or prepare failed"; return 1; }
  cat > "$T/cfg.json" <<'JSON'
{"model_type": "roberta", "vocab_size": 300, "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
 "intermediate_size": 32, "max_position_embeddings": 40, "type_vocab_size": 1, "pad_token_id": 3, "bos_token_id": 0,
 "eos_token_id": 1, "layer_norm_eps": 1e-5, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
 "initializer_range": 0.02}
JSON
}

# Compares a reference's output with maskd's (files of lines), names the first difference;
# maskd's empty output (its command failed) shows its FILE.err.
same() {  # name, reference file, maskd file
  local n diff_line
  n=$(wc -l < "$2")
  if [ ! -s "$3" ] && [ -s "$2" ]; then fail "$1" "maskd printed nothing: $(head -c 300 "$3.err" 2>/dev/null)"; return 1; fi
  if cmp -s "$2" "$3"; then pass "$1 ($n lines)"; return 0; fi
  diff_line=$(cmp "$2" "$3" 2>&1 | head -1)
  fail "$1" "outputs differ: $diff_line; hf: $(diff "$2" "$3" | sed -n 2p | cut -c1-150) maskd: $(diff "$2" "$3" | grep '^>' | head -1 | cut -c1-150)"
  return 1
}

lib_exit=()
at_exit() { lib_exit+=("$1"); }
lib_cleanup() {
  local c
  for c in "${lib_exit[@]}"; do eval "$c"; done
  [ -n "$pid" ] && kill "-$serve_kill" "$pid" 2>/dev/null
  wait 2>/dev/null
  if [ -n "${MASKD_SANITIZER_LOGS:-}" ]; then
    for c in "$T"/sanitizer/*; do
      [ -f "$c" ] && fail sanitizer_report "${c##*/}: $(grep -m4 -E 'ERROR|runtime error|SUMMARY|#[0-9] ' "$c" | tr '\n' ' ')"
    done
  fi
  [ -n "${lib_keep:-}" ] || rm -rf "$T"
}
trap lib_cleanup EXIT
