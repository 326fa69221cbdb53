#!/usr/bin/env bash
# The kernels' level from the command line (MASKD_ISA, engine/core/cpu.c): a wrong value
# stops maskd with one line before any work; bench and version say which kernels run;
# a run records them; and a model trained once answers fill-mask with the same top
# token at every level this CPU runs (a level it lacks is one SKIP line).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" isacli "${1:-}"

# One line on stderr (maskd's notes about OpenBLAS aside), non-zero exit, nothing on stdout.
refused() {  # name, needle, MASKD_ISA value
  local name=$1 needle=$2 out err rc
  out=$(MASKD_ISA=$3 "$M" version 2>"$T/err"); rc=$?
  err=$(grep -v '^maskd: note' "$T/err")
  if [ $rc -ne 0 ] && [ -z "$out" ] && [ "$(wc -l <<<"$err")" = 1 ] && grep -qF -- "$needle" <<<"$err"; then pass "$name"
  else fail "$name" "rc $rc, stdout '$out', stderr: $err (wanted $needle)"; fi
}
refused isa_cli_refuses_unknown_level "maskd: MASKD_ISA=bogus: expected generic, avx2, avx512 or avx512bf16" bogus
refused isa_cli_refuses_upper_case "maskd: MASKD_ISA=AVX2:" AVX2

best=$("$M" version 2>/dev/null | sed -n 's/^kernels [a-z0-9]* (best \([a-z0-9]*\),.*/\1/p')
case "$best" in
  generic) levels=(generic) ;;
  avx2) levels=(generic avx2) ;;
  avx512) levels=(generic avx2 avx512) ;;
  avx512bf16) levels=(generic avx2 avx512 avx512bf16) ;;
  *) fail isa_cli_version "maskd version names no best level: $("$M" version 2>&1)"; exit 1 ;;
esac
pass isa_cli_version
# Every command has --help (README): version's says what it prints; an argument is refused.
out=$("$M" version --help 2>&1); rc=$?
[ $rc = 0 ] && grep -q "^usage: maskd version" <<<"$out" && ! grep -q "^maskd [0-9]" <<<"$out" && pass isa_cli_version_help ||
  fail isa_cli_version_help "rc $rc: $out"
out=$("$M" version extra 2>&1 >/dev/null); rc=$?
[ $rc = 2 ] && [ "$out" = "maskd version: takes no arguments (got 'extra')" ] && pass isa_cli_version_refuses_arguments ||
  fail isa_cli_version_refuses_arguments "rc $rc: $out"
for lv in generic avx2 avx512 avx512bf16; do
  if [[ " ${levels[*]} " != *" $lv "* ]]; then
    refused "isa_cli_refuses_${lv}_on_this_cpu" "maskd: MASKD_ISA=$lv: this CPU cannot run the $lv kernels" "$lv"
  fi
done

# bench sgemm names the level and the backend; generic multiplies with OpenBLAS.
out=$(MASKD_ISA=generic "$M" bench sgemm --mnk 64,64,64 --reps 2 2>/dev/null)
grep -q "^  kernels generic (best $best, avx512-bf16 \(yes\|no\)), gemm openblas, bf16 gemm generic-bf16-emulated, CPU ." <<<"$out" &&
  grep -q "maskd (openblas)" <<<"$out" && pass isa_cli_bench_generic_openblas || fail isa_cli_bench_generic_openblas "$out"
out=$(MASKD_ISA=generic "$M" bench sgemm --mnk 64,64,64 --reps 2 --json 2>/dev/null)
python3 -c 'import json,sys; o=json.loads(sys.argv[1]); assert o["isa"]=="generic" and o["backend"]=="openblas" and o["cpu"], o' "$out" 2>/dev/null &&
  pass isa_cli_bench_json || fail isa_cli_bench_json "$out"

# A tiny run (best level): its record names the kernels; then fill-mask at every level.
[ -f "$DATA/train.txt" ] || { fail isa_cli_setup "no WikiText-2 at $DATA"; exit 1; }
small_training_setup isa_cli_setup 60000 || exit 1
"$M" train --db "$T/i.db" --name isa --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" \
  --max-steps 30 --batch 8 --lr 3e-3 --threads 1 --seed 4 --quiet 2>"$T/train.err" ||
  { fail isa_cli_train "$(tail -2 "$T/train.err")"; exit 1; }
rec=$(sqlite3 "$T/i.db" "SELECT json_extract(dist, '$.isa') || ' ' || json_extract(dist, '$.gemm') || ' ' || (json_extract(dist, '$.cpu') <> '') FROM runs")
[ "$rec" = "$best $("$M" version 2>/dev/null | sed -n 's/.*, gemm \([^,]*\),.*/\1/p') 1" ] && pass isa_cli_run_records_kernels ||
  fail isa_cli_run_records_kernels "dist records '$rec'"
top=
for lv in "${levels[@]}"; do
  t=$(MASKD_ISA=$lv "$M" fill-mask --db "$T/i.db" --model isa --threads 1 --quiet --top-k 1 "The [MASK] of the city ." 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["token"])' 2>&1)
  [ -z "$top" ] && top=$t
  [ -n "$t" ] && [ "$t" = "$top" ] && pass "isa_cli_fill_mask_same_top_$lv" || fail "isa_cli_fill_mask_same_top_$lv" "'$t', generic '$top'"
done
