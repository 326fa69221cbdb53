#!/usr/bin/env bash
# maskd tokenizer train from the command line: a small training writes the three
# files, encodes, and HF loads it with the same ids; bad input gives one clear
# line on stderr and a non-zero exit, never a crash.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" toktrain
maskd=$M tmp=$T
export MASKD_KEEP_OPENBLAS_CORETYPE=1

# expect_error NAME PATTERN ARGS...: exit status 1 or 2, one stderr line matching PATTERN (--quiet: no progress)
expect_error() {
  local name=$1 pat=$2; shift 2
  "$maskd" tokenizer train --quiet "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if { [ $rc -eq 1 ] || [ $rc -eq 2 ]; } && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$pat" "$tmp/err"; then echo "PASS $name"
  else echo "FAIL $name: rc $rc, stderr: $(head -c 300 "$tmp/err")"; fi
}

for i in $(seq 1 40); do
  echo " the quick brown fox jumps over the lazy dog , said the $i th fox ."
  echo " \`\`quoted'' text with <unk> and naïve café façade @-@ $((i * 37)) "
done >"$tmp/corpus.txt"
mkdir -p "$tmp/tok"
"$maskd" tokenizer train --input "$tmp/corpus.txt" "$tmp/corpus.txt" --vocab-size 90 --out "$tmp/tok/tokenizer.json" --threads 2 2>"$tmp/progress"
rc=$?
if [ $rc -eq 0 ] && [ -s "$tmp/tok/tokenizer.json" ] && [ -s "$tmp/tok/tokenizer_config.json" ] && [ -s "$tmp/tok/special_tokens_map.json" ]; then
  echo "PASS train_writes_three_files"
else echo "FAIL train_writes_three_files: rc $rc $(tail -2 "$tmp/progress")"; fi
if grep -q "EM round" "$tmp/progress" && grep -q "ETA" "$tmp/progress"; then echo "PASS train_progress_on_stderr"
else echo "FAIL train_progress_on_stderr: $(head -3 "$tmp/progress")"; fi

python3 - "$tmp/tok/tokenizer.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
v = t["model"]["vocab"]
ok = (t["model"]["type"] == "Unigram" and len(v) == 90 and [p for p, _ in v[:5]] == ["[CLS]", "[SEP]", "<unk>", "<pad>", "[MASK]"]
      and t["model"]["unk_id"] == 2 and "ç" in [p for p, _ in v] and "\n" not in [p for p, _ in v[:5]]
      and all(v[i][1] >= v[i + 1][1] for i in range(5, len(v) - 1)) and len(set(p for p, _ in v)) == len(v))
print(("PASS" if ok else "FAIL") + " train_vocab_layout" + ("" if ok else f": {len(v)} pieces, first {v[:6]}"))
EOF

printf ' the quick brown fox [MASK] over the lazy dog .\n naïve façade\n' >"$tmp/probe.txt"
"$maskd" tokenizer encode --tokenizer "$tmp/tok/tokenizer.json" --input "$tmp/probe.txt" >"$tmp/m.ids" 2>/dev/null
if [ "$(wc -l <"$tmp/m.ids")" -eq 2 ] && head -1 "$tmp/m.ids" | grep -q '^0 .* 4 .* 1$'; then echo "PASS train_output_encodes"
else echo "FAIL train_output_encodes: $(head -c 200 "$tmp/m.ids")"; fi
if [ -d tests/node_modules/tokenizers ]; then
  node tests/hf_tokenize.js encode "$tmp/tok/tokenizer.json" "$tmp/corpus.txt" >"$tmp/h.ids" 2>"$tmp/h.err"
  "$maskd" tokenizer encode --tokenizer "$tmp/tok/tokenizer.json" --input "$tmp/corpus.txt" >"$tmp/m2.ids" 2>/dev/null
  if [ -s "$tmp/h.ids" ] && cmp -s "$tmp/h.ids" "$tmp/m2.ids"; then echo "PASS train_output_hf_same_ids"
  else echo "FAIL train_output_hf_same_ids: $(diff "$tmp/h.ids" "$tmp/m2.ids" | head -3) $(head -c 200 "$tmp/h.err")"; fi
fi

printf 'fine\nalso fine\nbroken \xc3\x28 here\n' >"$tmp/bad.txt"
: >"$tmp/empty.txt"
expect_error train_invalid_utf8_names_file_and_line "bad.txt:3: invalid UTF-8 at byte 7" --input "$tmp/bad.txt" --vocab-size 50 --out "$tmp/x.json"
# A line over the 64 MiB limit is refused, also when it ends in a newline and more lines
# follow (the reader measured only an unfinished line; a grown buffer held this one whole).
python3 -c "import sys; f = open(sys.argv[1], 'wb'); f.write(b'a b\n'); f.write(b'ab ' * 23000000 + b'\n'); f.write(b'c d\n')" "$tmp/long.txt"
expect_error train_line_over_limit_refused "long.txt:2: a line of more than 67108864 bytes" --input "$tmp/long.txt" --vocab-size 50 --out "$tmp/x.json"
rm -f "$tmp/long.txt"
expect_error train_empty_corpus "empty corpus" --input "$tmp/empty.txt" --vocab-size 50 --out "$tmp/x.json"
expect_error train_vocab_below_alphabet "smaller than the alphabet" --input "$tmp/corpus.txt" --vocab-size 20 --out "$tmp/x.json"
expect_error train_missing_file "nope.txt" --input "$tmp/nope.txt" --vocab-size 50 --out "$tmp/x.json"
# --out's folder is made with its parents (the README's pipeline writes tok/tokenizer.json
# into a tok/ nothing made); a file where a folder goes is refused.
"$maskd" tokenizer train --quiet --input "$tmp/corpus.txt" --vocab-size 90 --out "$tmp/no/such/x.json" 2>"$tmp/err" &&
  [ -s "$tmp/no/such/x.json" ] && echo "PASS train_makes_out_folders" || echo "FAIL train_makes_out_folders: $(cat "$tmp/err")"
# A training that fails takes back the folders it made.
expect_error train_failure_no_folders "nope.txt" --input "$tmp/nope.txt" --vocab-size 50 --out "$tmp/gone/a/x.json"
[ ! -e "$tmp/gone" ] && echo "PASS train_failure_removes_made_folders" || echo "FAIL train_failure_removes_made_folders: $(find "$tmp/gone")"
touch "$tmp/plainfile"
expect_error train_out_folder_is_a_file "^maskd tokenizer train: --out: .*plainfile: " --input "$tmp/corpus.txt" --vocab-size 50 --out "$tmp/plainfile/x.json"
expect_error train_needs_vocab "vocab-size is required" --input "$tmp/corpus.txt" --out "$tmp/x.json"
expect_error train_bad_number "--vocab-size: expected an integer in \[1, 10000000\], got '12abc'" --input "$tmp/corpus.txt" --vocab-size 12abc --out "$tmp/x.json"
expect_error train_bad_shrinking "shrinking-factor" --input "$tmp/corpus.txt" --vocab-size 50 --shrinking-factor 1.5 --out "$tmp/x.json"
expect_error train_unknown_option "unknown option" --input "$tmp/corpus.txt" --vocab-size 50 --out "$tmp/x.json" --frobnicate
[ ! -e "$tmp/x.json" ] && echo "PASS train_errors_write_nothing" || echo "FAIL train_errors_write_nothing: x.json exists"

# --job is maskd serve's hand-off: the job's description, nothing else; a job must be a
# queued tokenizer job the worker claimed, and it writes the folder the worker made.
expect_error train_job_takes_no_other_options "--job trains the tokenizer job as it was queued" --job 1 --work-dir "$tmp/w" --vocab-size 50
expect_error train_job_takes_no_threads "--job trains the tokenizer job as it was queued" --job 1 --work-dir "$tmp/w" --threads 2
expect_error train_job_folders_need_job "--db, --data-dir and --work-dir go with --job" --work-dir "$tmp/w" --input "$tmp/corpus.txt" --vocab-size 50 --out "$tmp/x.json"
expect_error train_job_not_an_id '--job: "x" is not a job id' --db "$tmp/j.db" --job x --work-dir "$tmp/w"
expect_error train_job_needs_work_dir "--job needs --work-dir" --db "$tmp/j.db" --job 7
expect_error train_job_unknown "job 7 does not exist" --db "$tmp/j.db" --job 7 --work-dir "$tmp/w"
mkdir -p "$tmp/data" && cp "$tmp/corpus.txt" "$tmp/data/corpus.txt"
sqlite3 "$tmp/j.db" "INSERT INTO jobs(id, kind, status, params, created) VALUES
  (8, 'tokenizer', 'queued', '{\"name\": \"q\", \"input\": \"corpus.txt\", \"vocab_size\": 90}', 0), (9, 'prepare', 'running', '{}', 0),
  (10, 'tokenizer', 'running', '{\"name\": \"q\", \"input\": [\"corpus.txt\", \"corpus.txt\"], \"vocab_size\": 90}', 0)"
expect_error train_job_not_claimed "job 8 is queued" --db "$tmp/j.db" --job 8 --work-dir "$tmp/w" --data-dir "$tmp/data"
expect_error train_job_not_tokenizer "job 9 is a prepare job, not a tokenizer job" --db "$tmp/j.db" --job 9 --work-dir "$tmp/w"
expect_error train_job_no_output_folder 'no output folder "q"' --db "$tmp/j.db" --job 10 --work-dir "$tmp/w" --data-dir "$tmp/data"
[ ! -e "$tmp/w/tokenizers/q" ] && echo "PASS train_job_refusals_write_nothing" || echo "FAIL train_job_refusals_write_nothing: $(ls -A "$tmp/w/tokenizers")"
# The claimed job, run as the worker runs it: the corpora and vocabulary size are the job's.
mkdir "$tmp/w/tokenizers/q"
"$maskd" tokenizer train --db "$tmp/j.db" --job 10 --work-dir "$tmp/w" --data-dir "$tmp/data" --quiet 2>"$tmp/err"
rc=$?
n=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['model']['vocab']))" "$tmp/w/tokenizers/q/tokenizer.json" 2>/dev/null)
[ $rc -eq 0 ] && [ "$n" = 90 ] && [ -s "$tmp/w/tokenizers/q/tokenizer_config.json" ] && echo "PASS train_job_writes_its_folder" ||
  echo "FAIL train_job_writes_its_folder: rc $rc, $n pieces, $(cat "$tmp/err")"

# Inputs: regular files only (a device or a FIFO is refused at once, never read);
# a value that looks like an option is never taken as one: --input=FILE names any file.
expect_error train_refuses_dev_zero "character device, not a regular file" --input /dev/zero --vocab-size 50 --out "$tmp/x.json"
mkfifo "$tmp/fifo"
start=$SECONDS
timeout 20 "$maskd" tokenizer train --quiet --input "$tmp/fifo" --vocab-size 50 --out "$tmp/x.json" >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 1 ] && grep -q 'FIFO' "$tmp/err" && [ $((SECONDS - start)) -lt 10 ] && echo "PASS train_refuses_fifo" ||
  echo "FAIL train_refuses_fifo: rc $rc $(cat "$tmp/err")"
(cd "$tmp" && "$maskd" tokenizer train --input corpus.txt --vocab-size 90 --out --quiet) >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q -- '--out needs a value' "$tmp/err" && [ ! -e "$tmp/--quiet" ] && echo "PASS train_option_is_not_a_value" ||
  echo "FAIL train_option_is_not_a_value: rc $rc $(cat "$tmp/err"); $(ls "$tmp")"
cp "$tmp/corpus.txt" "$tmp/-dash.txt"
(cd "$tmp" && "$maskd" tokenizer train --quiet --input=-dash.txt --vocab-size 90 --out=-dash.json) 2>"$tmp/err" &&
  [ -s "$tmp/-dash.json" ] && echo "PASS train_equals_form_takes_any_value" || echo "FAIL train_equals_form_takes_any_value: $(cat "$tmp/err")"

# A full disk (a file-size limit: the write fails with EFBIG) leaves the three files as
# they were and no temporary; the next successful training replaces them.
sums() { (cd "$1" && cksum $(ls -A | sort)); }
before=$(sums "$tmp/tok")
(ulimit -f 2; exec "$maskd" tokenizer train --quiet --input "$tmp/corpus.txt" --vocab-size 80 --out "$tmp/tok/tokenizer.json") 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q 'File too large' "$tmp/err" && [ "$(sums "$tmp/tok")" = "$before" ] && [ -z "$(ls -A "$tmp/tok" | grep tmp-)" ]; then
  echo "PASS train_full_disk_keeps_old_files"
else echo "FAIL train_full_disk_keeps_old_files: rc $rc $(cat "$tmp/err"); $(ls -A "$tmp/tok")"; fi
"$maskd" tokenizer train --quiet --input "$tmp/corpus.txt" --vocab-size 80 --out "$tmp/tok/tokenizer.json" 2>"$tmp/err"
after=$(sums "$tmp/tok")
n=$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))['model']['vocab']))" "$tmp/tok/tokenizer.json" 2>/dev/null)
[ "$after" != "$before" ] && [ "$n" = 80 ] && [ -z "$(ls -A "$tmp/tok" | grep tmp-)" ] && echo "PASS train_replaces_files" ||
  echo "FAIL train_replaces_files: $n pieces, $(cat "$tmp/err")"
