#!/usr/bin/env bash
# maskd train --precision bf16 end to end (issue 15): the flag is stored with the run and
# refused when unknown; a bf16 run killed with SIGKILL and resumed (once at the emulated
# avx512 level, as on a CPU without AVX512-BF16) ends bit-identical to the same run never
# stopped (every step's loss, lr and grad norm, every evaluation, the final weights'
# sha256); a whole run at MASKD_ISA=avx512 gives avx512bf16's bits; bf16 and fp32 runs
# differ; a resume cannot change the precision; 2 ranks in bf16 give the bits of 1 rank
# with --grad-accum 2. The setup is test_resume.sh's.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" train_bf16 "${1:-}"
[ -f "$DATA/train.txt" ] || { fail train_bf16_setup "no WikiText-2 at $DATA"; exit 1; }

small_training_setup train_bf16_setup 120000 || exit 1
args=(--name fast --tokenizer "$T/tok.json" --train "$T/train" --validation "$T/valid" --config "$T/cfg.json"
      --epochs 3 --batch 8 --lr 2e-3 --threads 1 --checkpoint-steps 7 --clip-norm 1.0 --seed 11 --quiet)

# The flag: refused with one line naming it when unknown.
out=$("$M" train --db "$T/x.db" "${args[@]}" --precision fp16 2>&1); rc=$?
[ $rc = 2 ] && [ "$out" = "maskd train: --precision: expected fp32 or bf16, got 'fp16'" ] &&
  pass train_bf16_refuses_unknown || fail train_bf16_refuses_unknown "status $rc: $out"

# The best level this CPU runs: the cross-level checks need avx512bf16 (vdpbf16ps) on it.
best=$("$M" version 2>/dev/null | sed -n 's/^kernels [a-z0-9]* (best \([a-z0-9]*\),.*/\1/p')
resume_isa=$best
[ "$best" = avx512bf16 ] && resume_isa=avx512

"$M" train --db "$T/a.db" "${args[@]}" --precision bf16 2>"$T/a.err" ||
  { fail train_bf16_reference_run "$(tail -1 "$T/a.err")"; exit 1; }
total=$(sqlite3 "$T/a.db" "SELECT total_steps FROM runs")
p=$(sqlite3 "$T/a.db" "SELECT json_extract(config, '$.precision') FROM runs")
[ "$p" = bf16 ] && pass train_bf16_stored || fail train_bf16_stored "the run's config has precision \"$p\""

# The run's first line names the bf16 products' kernels, as `maskd version` does: emulated
# in float (no AVX512-BF16, or Intel's vdpbf16ps at half the FMA's rate) they are no
# faster than fp32's, and a user deciding on bf16 should see that.
kernels=$("$M" version 2>/dev/null | sed -n 's/.*, bf16 gemm \([a-z0-9+-]*\),.*/\1/p')
"$M" train --db "$T/n.db" --name named --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" \
  --max-steps 1 --batch 8 --threads 1 --precision bf16 2>"$T/n.err"
[ -n "$kernels" ] && grep -q "parameters, bf16 products ($kernels)" "$T/n.err" && pass train_bf16_names_its_kernels ||
  fail train_bf16_names_its_kernels "kernels '$kernels': $(head -1 "$T/n.err")"

dump() {  # everything that must match, at full precision
  sqlite3 "$1" "SELECT step, printf('%.17e %.17e %.17e', loss, lr, grad_norm) FROM step_metrics ORDER BY step;
                SELECT epoch, printf('%.17e %.17e %.17e', train_loss, eval_loss, eval_accuracy) FROM epoch_metrics ORDER BY epoch;
                SELECT r.weights FROM revisions r WHERE r.message = 'Training in progress epoch 3';"
}
dump "$T/a.db" > "$T/a.txt"

# Run B: killed with SIGKILL after a random checkpoint, resumed; the first resume at
# $resume_isa (avx512's emulation of vdpbf16ps where the CPU has it), the second at the best level.
kills=0 refused_ok=1
"$M" train --db "$T/b.db" "${args[@]}" --precision bf16 2>>"$T/b.err" &
pid=$!
for round in 1 2; do
  k=$(( round * total / 3 + RANDOM % (total / 5) ))
  for _ in $(seq 600); do
    s=$(sqlite3 "$T/b.db" "SELECT COALESCE(MAX(step), 0) FROM revisions" 2>/dev/null || echo 0)
    [ "${s:-0}" -ge "$k" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.02
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"; wait "$pid" 2>/dev/null; kills=$((kills + 1))
  else
    wait "$pid"
  fi
  [ "$(sqlite3 "$T/b.db" "SELECT status FROM runs")" = done ] && break
  if [ "$round" = 1 ]; then
    # A resume keeps the run's precision: one given that differs is refused by name.
    out=$("$M" train --db "$T/b.db" "${args[@]}" --precision fp32 --resume 2>&1)
    [[ "$out" == "maskd train: precision: differs from the stored run's"* ]] || { refused_ok=0; echo "# $out"; }
    MASKD_ISA=$resume_isa "$M" train --db "$T/b.db" --resume fast --quiet 2>>"$T/b.err" &
  else
    "$M" train --db "$T/b.db" --resume fast --quiet 2>>"$T/b.err" &
  fi
  pid=$!
done
rc=0
kill -0 "$pid" 2>/dev/null && { wait "$pid"; rc=$?; }
st=$(sqlite3 "$T/b.db" "SELECT status FROM runs")
[ $rc = 0 ] && [ "$st" = done ] && pass train_bf16_resume_finishes || fail train_bf16_resume_finishes "rc $rc, status $st: $(tail -2 "$T/b.err")"
[ "$kills" -ge 1 ] && pass train_bf16_resume_was_killed || fail train_bf16_resume_was_killed "no kill landed"
[ $refused_ok = 1 ] && pass train_bf16_resume_keeps_precision || fail train_bf16_resume_keeps_precision "a resume with --precision fp32 was not refused"
dump "$T/b.db" > "$T/b.txt"
lines=$(wc -l < "$T/a.txt")
if [ "$lines" -eq $((total + 4)) ] && cmp -s "$T/a.txt" "$T/b.txt"; then
  pass train_bf16_resume_bit_identical
else
  fail train_bf16_resume_bit_identical "$lines lines (want $((total + 4))); first difference: $(diff "$T/a.txt" "$T/b.txt" | head -3 | tr '\n' ' ')"
fi

# The whole run at avx512 (float emulation of vdpbf16ps): avx512bf16's bits.
if [ "$best" = avx512bf16 ]; then
  MASKD_ISA=avx512 "$M" train --db "$T/c.db" "${args[@]}" --precision bf16 2>"$T/c.err"
  dump "$T/c.db" > "$T/c.txt"
  cmp -s "$T/a.txt" "$T/c.txt" && pass train_bf16_avx512_same_bits ||
    fail train_bf16_avx512_same_bits "first difference: $(diff "$T/a.txt" "$T/c.txt" | head -3 | tr '\n' ' ')"
else
  echo "SKIP train_bf16_avx512_same_bits: this CPU's best level is $best, not avx512bf16"
fi

# Control: the fp32 run gives other numbers (the precision reaches the products).
if ! "$M" train --db "$T/d.db" "${args[@]}" 2>"$T/d.err"; then
  fail train_bf16_differs_from_fp32 "the fp32 run failed: $(tail -1 "$T/d.err")"
elif dump "$T/d.db" > "$T/d.txt" && [ -s "$T/d.txt" ] && ! cmp -s "$T/a.txt" "$T/d.txt"; then
  pass train_bf16_differs_from_fp32
else
  fail train_bf16_differs_from_fp32 "fp32 gave the bf16 dump, or no dump"
fi

# Data-parallel: the precision travels in the run description to every rank, so 2 ranks in
# bf16 give the bits of 1 rank with --grad-accum 2 in bf16 (test_dist.sh's check for fp32).
if command -v mpirun >/dev/null; then
  dp=(--name dp --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" --max-steps 30 --batch 8 --lr 2e-3
      --threads 1 --seed 5 --quiet --precision bf16)
  "$M" train --db "$T/dp1.db" "${dp[@]}" --grad-accum 2 2>"$T/dp1.err" &&
    "$M" train --db "$T/dp2.db" "${dp[@]}" --ranks 2 2>"$T/dp2.err"; rc=$?
  dpdump() { sqlite3 "$1" "SELECT step, printf('%.17e %.17e', loss, grad_norm) FROM step_metrics ORDER BY step;
                           SELECT weights FROM revisions ORDER BY seq DESC LIMIT 1; SELECT json_extract(config, '$.precision') FROM runs"; }
  dpdump "$T/dp1.db" > "$T/dp1.txt" 2>/dev/null; dpdump "$T/dp2.db" > "$T/dp2.txt" 2>/dev/null
  [ $rc = 0 ] && [ "$(wc -l < "$T/dp1.txt")" -eq 32 ] && [ "$(tail -1 "$T/dp2.txt")" = bf16 ] && cmp -s "$T/dp1.txt" "$T/dp2.txt" &&
    pass train_bf16_two_ranks_equal_grad_accum_bits ||
    fail train_bf16_two_ranks_equal_grad_accum_bits "rc $rc: $(diff "$T/dp1.txt" "$T/dp2.txt" | head -3 | tr '\n' ' ') $(tail -1 "$T/dp2.err")"
else
  fail train_bf16_two_ranks_equal_grad_accum_bits "mpirun is missing (scripts/setup installs openmpi-bin)"
fi
