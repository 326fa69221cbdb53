#!/usr/bin/env bash
# maskd prepare --ids end to end, read back by scripts/shards.py (an independent reader
# written from the format's documentation) and compared with chunks recomputed in Python.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" prepare_cli
MASKD=$M

# Id lines like an encoder's output ([CLS]=0 ... [SEP]=2), blank lines in between.
$PY - "$T/ids.txt" <<'PY'
import random, sys
r = random.Random(5)
with open(sys.argv[1], "w") as f:
    for i in range(4000):
        if r.random() < 0.2:
            f.write(" \n" if r.random() < 0.5 else "\n")
        else:
            f.write(" ".join(["0"] + [str(r.randrange(5, 3000)) for _ in range(r.randrange(1, 40))] + ["2"]) + "\n")
PY

if out=$("$MASKD" prepare --input "$T/ids.txt" --ids --vocab-size 3000 --seq-len 16 --shard-size 300 --split train \
          --tokenizer-hash fnv1a64:feedface --out "$T/set" 2>"$T/err"); then pass prepare_cli_runs
else fail prepare_cli_runs "exit $?: $(tail -1 "$T/err")"; fi
grep -q 'ETA' "$T/err" && pass prepare_cli_progress || fail prepare_cli_progress "no progress line on stderr"

check=$($PY - "$T/ids.txt" "$T/set" <<'PY' 2>&1
import sys, numpy as np
sys.path.insert(0, "scripts")
import shards
ids = []
skipped = 0
for line in open(sys.argv[1]):
    if line.strip() == "":
        skipped += 1
        continue
    ids += [int(x) for x in line.split()]
L = 16
n = len(ids) // L
want = np.array(ids[: n * L], dtype=np.uint32).reshape(n, L)
manifest, got = shards.read_set(sys.argv[2])
assert got.shape == want.shape, (got.shape, want.shape)
assert (got == want).all(), "ids differ"
assert manifest["tokenizer_hash"] == "fnv1a64:feedface"
assert manifest["lines_skipped"] == skipped and manifest["lines"] == 4000
assert manifest["tokens"] == len(ids) and manifest["tokens_dropped"] == len(ids) - n * L
names = [s["file"] for s in manifest["shards"]]
assert names[0] == "train-00000-samples-300.shard", names[0]
assert names[-1] == "train-%05d-samples-%d.shard" % (len(names) - 1, n - 300 * (len(names) - 1)), names[-1]
print("ok", n, len(names))
PY
)
[[ "$check" == ok* ]] && pass prepare_cli_python_reader_agrees || fail prepare_cli_python_reader_agrees "$check"

# The Python reader refuses what the C reader refuses (independent agreement on damage).
f=$(ls "$T"/set/train-00001-*.shard)
cp "$f" "$T/copy" && printf '\x01' | dd of="$f" bs=1 seek=100 conv=notrunc status=none
r=$($PY scripts/shards.py "$T/set" 2>&1); [[ "$r" == *"checksum mismatch"* ]] && pass python_reader_detects_damage || fail python_reader_detects_damage "$r"
cp "$T/copy" "$f"

# Refusals: one line on stderr, non-zero exit.
"$MASKD" prepare --input "$T/ids.txt" --ids --vocab-size 3000 --seq-len 16 --out "$T/set" --quiet >/dev/null 2>"$T/err"
rc=$?; [ $rc -ne 0 ] && grep -q 'already exists' "$T/err" && [ "$(wc -l <"$T/err")" -eq 1 ] && pass prepare_cli_refuses_existing || fail prepare_cli_refuses_existing "rc $rc: $(cat "$T/err")"
"$MASKD" prepare --input "$T/nope.txt" --ids --vocab-size 3000 --out "$T/x" >/dev/null 2>"$T/err"
rc=$?; [ $rc -ne 0 ] && grep -q 'nope.txt' "$T/err" && pass prepare_cli_missing_input || fail prepare_cli_missing_input "rc $rc: $(cat "$T/err")"
"$MASKD" prepare --input "$T/ids.txt" --ids --vocab-size 100 --out "$T/y" --quiet >/dev/null 2>"$T/err"
rc=$?; [ $rc -ne 0 ] && grep -q 'outside the vocabulary' "$T/err" && [ ! -e "$T/y/manifest.json" ] && pass prepare_cli_refuses_big_id || fail prepare_cli_refuses_big_id "rc $rc: $(cat "$T/err")"
# A failed run into a new folder leaves no trace of it, the parents it made included.
"$MASKD" prepare --input "$T/ids.txt" --ids --vocab-size 100 --out "$T/deep/er/y" --quiet >/dev/null 2>"$T/err"
rc=$?; [ $rc -eq 1 ] && grep -q 'outside the vocabulary' "$T/err" && [ ! -e "$T/deep" ] && pass prepare_cli_failure_no_parents ||
  fail prepare_cli_failure_no_parents "rc $rc: $(cat "$T/err"); $(find "$T/deep" 2>&1)"
printf '0 5 x7 2\n' >"$T/bad.txt"
"$MASKD" prepare --input "$T/bad.txt" --ids --vocab-size 100 --out "$T/z" --quiet >/dev/null 2>"$T/err"
rc=$?; [ $rc -ne 0 ] && grep -q "'x' is not an id" "$T/err" && pass prepare_cli_refuses_non_number || fail prepare_cli_refuses_non_number "rc $rc: $(cat "$T/err")"
"$MASKD" prepare --input "$T/ids.txt" --ids --vocab-size 3000 --seq-len -3 --out "$T/w" >/dev/null 2>"$T/err"
rc=$?; [ $rc -eq 2 ] && grep -q -- '--seq-len' "$T/err" && pass prepare_cli_refuses_bad_flag || fail prepare_cli_refuses_bad_flag "rc $rc: $(cat "$T/err")"
"$MASKD" prepare --bogus >/dev/null 2>"$T/err"
rc=$?; [ $rc -eq 2 ] && grep -q 'unknown option' "$T/err" && pass prepare_cli_unknown_option || fail prepare_cli_unknown_option "rc $rc"
# A value is never read as an option, and an option never as a value: "--out --quiet"
# is refused (it made a folder named --quiet), "--out=-x" names a folder "-x".
M_ABS=$(realpath "$MASKD")
(cd "$T" && "$M_ABS" prepare --input ids.txt --ids --vocab-size 3000 --seq-len 16 --out --quiet) >/dev/null 2>"$T/err"
rc=$?; [ $rc -eq 2 ] && grep -q -- '--out needs a value' "$T/err" && [ ! -e "$T/--quiet" ] && pass prepare_cli_option_not_a_value ||
  fail prepare_cli_option_not_a_value "rc $rc: $(cat "$T/err"); $(ls "$T")"
(cd "$T" && "$M_ABS" prepare --input=ids.txt --ids --vocab-size=3000 --seq-len=16 --quiet --out=-x) >/dev/null 2>"$T/err"
rc=$?; [ $rc -eq 0 ] && [ -s "$T/-x/manifest.json" ] && pass prepare_cli_equals_form || fail prepare_cli_equals_form "rc $rc: $(cat "$T/err")"

# Inputs: a named input must be a regular file (a device or FIFO is refused at once).
"$MASKD" prepare --input /dev/zero --ids --vocab-size 3000 --out "$T/zero" >/dev/null 2>"$T/err"
rc=$?; [ $rc -eq 1 ] && grep -q 'not a regular file' "$T/err" && [ ! -e "$T/zero" ] && pass prepare_cli_refuses_dev_zero ||
  fail prepare_cli_refuses_dev_zero "rc $rc: $(cat "$T/err")"
mkfifo "$T/fifo"
timeout 20 "$MASKD" prepare --input "$T/fifo" --ids --vocab-size 3000 --out "$T/fifo-out" >/dev/null 2>"$T/err"
rc=$?; [ $rc -eq 1 ] && grep -q 'FIFO' "$T/err" && pass prepare_cli_refuses_fifo || fail prepare_cli_refuses_fifo "rc $rc: $(cat "$T/err")"

# The set appears whole or not at all. A full disk (a file-size limit: 8 KiB, less than a shard, so shard
# writes fail with EFBIG) during --overwrite leaves the old set as it was and no temporary;
# the same run without the limit replaces it. SIGTERM mid-run writes nothing.
sums() { (cd "$1" && cksum $(ls -A | sort)); }
before=$(sums "$T/set")
(ulimit -f 8; exec "$MASKD" prepare --input "$T/ids.txt" --ids --vocab-size 3000 --seq-len 8 --shard-size 600 --out "$T/set" --overwrite --quiet) 2>"$T/err"
rc=$?; [ $rc -eq 1 ] && grep -q 'File too large' "$T/err" && [ "$(sums "$T/set")" = "$before" ] && [ -z "$(ls -A "$T" | grep tmp-)" ] &&
  pass prepare_cli_full_disk_keeps_set || fail prepare_cli_full_disk_keeps_set "rc $rc: $(cat "$T/err"); $(ls -A "$T")"
"$MASKD" prepare --input "$T/ids.txt" --ids --vocab-size 3000 --seq-len 8 --shard-size 600 --out "$T/set" --overwrite --quiet 2>"$T/err"
rc=$?; [ $rc -eq 0 ] && [ "$(sums "$T/set")" != "$before" ] && grep -q '"seq_len": 8' "$T/set/manifest.json" && [ -z "$(ls -A "$T" | grep tmp-)" ] &&
  pass prepare_cli_overwrite_replaces_set || fail prepare_cli_overwrite_replaces_set "rc $rc: $(cat "$T/err")"
# --overwrite replaces a set of its own split only: the folder's train set stays whole, named.
before=$(sums "$T/set")
"$MASKD" prepare --input "$T/ids.txt" --ids --vocab-size 3000 --seq-len 8 --shard-size 600 --split valid --out "$T/set" --overwrite --quiet 2>"$T/err"
rc=$?; [ $rc -eq 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -qF "set/manifest.json is the set of split 'train'; --overwrite replaces a set of split 'valid' only" "$T/err" &&
  [ "$(sums "$T/set")" = "$before" ] && [ -z "$(ls -A "$T" "$T/set" | grep tmp-)" ] &&
  pass prepare_cli_overwrite_keeps_other_split || fail prepare_cli_overwrite_keeps_other_split "rc $rc: $(cat "$T/err"); $(ls -A "$T/set")"
# A mount point as --out (a tmpfs in a mount namespace of its own): the set moves in on its
# filesystem (the temporary inside it; beside it, the renames crossed filesystems: EXDEV),
# and a failed run there leaves no temporary behind.
mkdir -p "$T/mnt"
out=$(unshare -m sh -c '
  mount -t tmpfs none "$1" || exit 99
  "$2" prepare --input "$3" --ids --vocab-size 3000 --seq-len 8 --shard-size 600 --out "$1" --quiet >/dev/null || exit 1
  "$4" scripts/shards.py "$1" || exit 2
  printf "1 2 3\n" | "$2" prepare --input - --ids --vocab-size 3000 --seq-len 8 --split valid --out "$1" --quiet 2>/dev/null && exit 3
  ls -A "$1" | grep -v "^train-000[01][0-9]-samples-[0-9]*.shard$"' sh "$T/mnt" "$MASKD" "$T/ids.txt" "$PY" 2>&1); rc=$?
if [ $rc = 99 ] || ! unshare -m true 2>/dev/null; then
  echo "SKIP prepare_cli_mount_point: no tmpfs mount in a mount namespace here (unshare -m, as root): $out"
elif [ $rc = 0 ] && grep -q ": 8794 samples x 8 tokens, ok" <<<"$out" && [ "$(tail -n +2 <<<"$out")" = manifest.json ]; then
  pass prepare_cli_mount_point
else fail prepare_cli_mount_point "rc $rc: $out"; fi
# A bind mount of a folder of the same filesystem as --out: st_dev cannot tell it from its
# parent, and a rename from beside it failed with EXDEV after the whole set was written.
mkdir -p "$T/bind_src" "$T/bind"
out=$(unshare -m sh -c '
  mount --bind "$1" "$2" || exit 99
  "$3" prepare --input "$4" --ids --vocab-size 3000 --seq-len 8 --shard-size 600 --out "$2" --quiet >/dev/null || exit 1
  ls -A "$2" | grep -v "^train-000[01][0-9]-samples-[0-9]*.shard$"' sh "$T/bind_src" "$T/bind" "$MASKD" "$T/ids.txt" 2>&1); rc=$?
if [ $rc = 99 ] || ! unshare -m true 2>/dev/null; then
  echo "SKIP prepare_cli_bind_mount: no bind mount in a mount namespace here (unshare -m, as root): $out"
elif [ $rc = 0 ] && [ "$out" = manifest.json ] && [ "$(ls -A "$T/bind_src" | grep -c '\.shard$')" -ge 2 ]; then
  pass prepare_cli_bind_mount
else fail prepare_cli_bind_mount "rc $rc: $out"; fi
{ cat "$T/ids.txt"; sleep 3; cat "$T/ids.txt"; } | "$MASKD" prepare --input - --ids --vocab-size 3000 --seq-len 8 --shard-size 50 --out "$T/sig" --quiet 2>"$T/err" &
pp=$!   # the pipeline's last command: maskd
sleep 1
kill -TERM $pp
wait $pp
rc=$?; [ $rc -eq 130 ] && [ ! -e "$T/sig" ] && [ -z "$(ls -A "$T" | grep tmp-)" ] && pass prepare_cli_sigterm_writes_nothing ||
  fail prepare_cli_sigterm_writes_nothing "rc $rc: $(cat "$T/err"); $(ls -A "$T")"

# --job is maskd serve's hand-off: the job's description, nothing else; a job must be a
# queued prepare job the worker claimed, and it writes the folder the worker made.
refuse_job() {  # name, needle, args...
  local name=$1 needle=$2; shift 2
  local rc
  "$MASKD" prepare "$@" >/dev/null 2>"$T/err"; rc=$?
  if [ $rc -ne 0 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -qF -- "$needle" "$T/err"; then pass "$name"
  else fail "$name" "rc $rc, stderr: $(cat "$T/err") (wanted $needle)"; fi
}
refuse_job prepare_cli_job_takes_no_other_options "--job runs the prepare job as it was queued" --job 1 --work-dir "$T/w" --seq-len 8
refuse_job prepare_cli_job_takes_no_ids "--job runs the prepare job as it was queued" --job 1 --work-dir "$T/w" --ids --vocab-size 3000
refuse_job prepare_cli_job_folders_need_job "--db, --data-dir and --work-dir go with --job" --data-dir "$T" --input "$T/ids.txt" --ids --vocab-size 3000 --out "$T/j"
refuse_job prepare_cli_job_not_an_id '--job: "x" is not a job id' --db "$T/j.db" --job x --work-dir "$T/w"
refuse_job prepare_cli_job_needs_work_dir "--job needs --work-dir" --db "$T/j.db" --job 7
refuse_job prepare_cli_job_unknown "job 7 does not exist" --db "$T/j.db" --job 7 --work-dir "$T/w"
mkdir -p "$T/data" && head -400 "$T/ids.txt" | tr -d '0-9' | sed 's/^/ the quick brown fox jumps over the lazy dog /' >"$T/data/text.txt"
"$MASKD" tokenizer train --quiet --input "$T/data/text.txt" --vocab-size 60 --out "$T/data/tok.json" 2>"$T/err" ||
  fail prepare_cli_job_setup "tokenizer train: $(cat "$T/err")"
sqlite3 "$T/j.db" "INSERT INTO jobs(id, kind, status, params, created) VALUES
  (8, 'prepare', 'queued', '{\"name\": \"ds\", \"tokenizer\": \"tok.json\", \"input\": \"text.txt\"}', 0), (9, 'tokenizer', 'running', '{}', 0),
  (10, 'prepare', 'running', '{\"name\": \"ds\", \"tokenizer\": \"tok.json\", \"input\": \"text.txt\", \"split\": \"valid\", \"seq_len\": 16}', 0)"
refuse_job prepare_cli_job_not_claimed "job 8 is queued" --db "$T/j.db" --job 8 --work-dir "$T/w" --data-dir "$T/data"
refuse_job prepare_cli_job_not_prepare "job 9 is a tokenizer job, not a prepare job" --db "$T/j.db" --job 9 --work-dir "$T/w"
refuse_job prepare_cli_job_no_output_folder 'no output folder "ds"' --db "$T/j.db" --job 10 --work-dir "$T/w" --data-dir "$T/data"
[ -z "$(ls -A "$T/w/datasets")" ] && pass prepare_cli_job_refusals_write_nothing || fail prepare_cli_job_refusals_write_nothing "$(ls -A "$T/w/datasets")"
# The claimed job, run as the worker runs it: tokenizer, input, split and length are the job's.
mkdir "$T/w/datasets/ds"
"$MASKD" prepare --db "$T/j.db" --job 10 --work-dir "$T/w" --data-dir "$T/data" --quiet >/dev/null 2>"$T/err"
rc=$?; [ $rc -eq 0 ] && grep -q '"seq_len": 16' "$T/w/datasets/ds/manifest.json" && ls "$T"/w/datasets/ds/valid-00000-*.shard >/dev/null 2>&1 &&
  pass prepare_cli_job_writes_its_folder || fail prepare_cli_job_writes_its_folder "rc $rc: $(cat "$T/err"); $(ls -A "$T/w/datasets/ds")"
