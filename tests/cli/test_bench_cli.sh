#!/usr/bin/env bash
# maskd bench: --help, one-line errors with a non-zero exit for bad arguments, and
# short train/infer/sgemm runs whose JSON is consistent with the shapes asked for.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" bench_cli
maskd=$M tmp=$T py=$PY

out=$("$maskd" bench --help 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q "usage: maskd bench train|infer" <<<"$out" && grep -q -- "--steps" <<<"$out"; then
  pass bench_help
else
  fail bench_help "rc $rc, output: $(head -c 200 <<<"$out")"
fi

# Each bad command line must fail with exactly one line on stderr naming the problem.
bad() {  # name, expected word in the message, args...
  local name=$1 word=$2; shift 2
  "$maskd" bench "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  local lines; lines=$(wc -l <"$tmp/err")
  if [ $rc -ne 0 ] && [ "$lines" -eq 1 ] && grep -q -- "$word" "$tmp/err" && [ ! -s "$tmp/out" ]; then
    pass "bench_error_$name"
  else
    fail "bench_error_$name" "rc $rc, $lines stderr lines: $(head -c 200 "$tmp/err")"
  fi
}
bad no_mode "mode"
bad unknown_mode "frobnicate" frobnicate --config tiny
bad missing_config "--config" train --batch 2 --seq 8 --steps 1
bad missing_batch "--batch" train --config tiny --seq 8 --steps 1
bad zero_batch "--batch" train --config tiny --batch 0 --seq 8 --steps 1
bad text_seq "--seq" train --config tiny --batch 2 --seq 8x --steps 1
bad no_value "--steps" train --config tiny --batch 2 --seq 8 --steps
bad unknown_option "--frob" infer --config tiny --batch 2 --seq 8 --steps 1 --frob
bad bad_peak "--peak" train --config tiny --batch 2 --seq 8 --steps 1 --peak -3
bad missing_file "nonexistent" train --config "$tmp/nonexistent.json" --batch 2 --seq 8 --steps 1
bad seq_too_long "--seq" train --config tiny --batch 1 --seq 100000 --steps 1 --peak 100
bad bad_mnk "--mnk" sgemm --mnk 3,4
printf '{"model_type": "roberta", "vocab_size": 50, "hidden_size": 30, "num_attention_heads": 4}' >"$tmp/bad.json"
bad bad_config "num_attention_heads" train --config "$tmp/bad.json" --batch 1 --seq 8 --steps 1

# A tiny custom config: a few steps must give sane, self-consistent numbers.
cat >"$tmp/config.json" <<'EOF'
{"model_type": "bert", "vocab_size": 300, "hidden_size": 32, "num_hidden_layers": 2,
 "num_attention_heads": 4, "intermediate_size": 64, "max_position_embeddings": 64,
 "type_vocab_size": 2, "pad_token_id": 0, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
 "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1, "initializer_range": 0.02}
EOF
check_json() {  # name, mode, python condition on j (the JSON), args...
  local name=$1 mode=$2 cond=$3; shift 3
  "$maskd" bench "$mode" "$@" --json >"$tmp/out" 2>"$tmp/err"; local rc=$?
  local why
  why=$($py - "$tmp/out" "$cond" <<'EOF'
import json, math, sys
try:
    j = json.loads(open(sys.argv[1]).read())
except Exception as e:
    print(f"not JSON: {e}"); sys.exit()
try:
    ok = eval("(" + sys.argv[2] + ")", {"j": j, "math": math})
except Exception as e:
    ok, sys.argv[2] = False, f"{sys.argv[2]} raised {e!r}"
if not ok:
    print("condition failed: " + " ".join(sys.argv[2].split()) + " on " + json.dumps(j)[:600])
EOF
)
  if [ $rc -eq 0 ] && [ -z "$why" ]; then pass "$name"; else fail "$name" "rc $rc $(head -c 200 "$tmp/err") $why"; fi
}
# B=3, T=20: 3 labelled rows per sequence (round(0.15*20)), 9 in all. Forward matmul FLOPs:
# per layer 2*60*32*96 + 2*2*3*20*20*32 + 2*60*32*32 + 2*2*60*32*64 = 1,136,640; head 2*9*(32*32+32*300)
# = 191,232; forward 2,464,512; a training step 3x that.
check_json bench_train_json train \
  'j["mode"]=="train" and j["batch"]==3 and j["seq"]==20 and j["head_rows"]==9 and j["steps"]==3
   and abs(j["gflop_per_step"]-3*2464512e-9)<1e-6 and j["step_ms_median"]>0
   and abs(j["tokens_per_s"]-60/j["step_ms_median"]*1e3)<1e-3*j["tokens_per_s"]+0.1
   and abs(j["gflops"]-j["gflop_per_step"]/j["step_ms_median"]*1e3)<0.01*j["gflops"]+1e-3
   and abs(j["loss_first"]-math.log(300))<0.3 and j["loss_last"]<j["loss_first"]
   and j["peak_gflops"]==100 and 0 < j["executed_gflop_per_step"] <= j["gflop_per_step"]
   and abs(j["peak_fraction"]-j["executed_gflops"]/100)<1e-3 and all(j["phases_ms"][k]>0 for k in ("forward","backward","optimizer"))
   and list(j["products_ms"])==["QKV","attn.out","ffn.up","ffn.down","head"]
   and all(v["forward"]>0 and v["backward"]>0 for v in j["products_ms"].values())
   and abs(sum(v["forward"]+v["backward"] for v in j["products_ms"].values())-j["profile_ms"]["matmul"])<0.011' \
  --config "$tmp/config.json" --batch 3 --seq 20 --steps 3 --warmup 1 --threads 1 --peak 100
check_json bench_infer_json infer \
  'j["mode"]=="infer" and j["head_rows"]==9 and abs(j["gflop_per_step"]-2464512e-9)<1e-6
   and j["step_ms_median"]>0 and j["params"]>300*32
   and all(v["forward"]>0 and v["backward"]==0 for v in j["products_ms"].values())
   and abs(sum(v["forward"] for v in j["products_ms"].values())-j["profile_ms"]["matmul"])<0.006' \
  --config "$tmp/config.json" --batch 3 --seq 20 --steps 2 --threads 2 --peak 100
check_json bench_sgemm_json sgemm 'j["gflops_median"]>0 and j["m"]==64 and j["n"]==48 and j["k"]==32' \
  --mnk 64,48,32 --reps 3 --threads 1
check_json bench_sgemm_bt_copies_json sgemm \
  'j["bt"]==1 and j["copies"]==3 and j["gflops_median"]>0 and j["openblas_gflops_median"]>0' \
  --mnk 16,200,64 --bt --copies 3 --reps 4 --threads 2
check_json bench_sgemm_at_json sgemm 'j["at"]==1 and j["bt"]==0 and j["gflops_median"]>0' \
  --mnk 40,30,20 --at --reps 3 --threads 2
bad bad_copies "--copies" sgemm --mnk 16,200,64 --copies 0
# --precision: the report names it and the bf16 product's kernels. Training at bf16 still
# learns (float master weights); inference keeps the weights in bf16, as serving does; the
# bf16 product with B^T holds B in bf16 (2 bytes read per element) and, at the generic
# level, runs the float emulation; its peak is vdpbf16ps's measured rate where vdpbf16ps
# runs (2x the FMA's on Zen 5, 0.5x on Intel's cores), else the FMA's.
bad bad_precision "--precision" train --config tiny --batch 2 --seq 8 --steps 1 --precision fp16
check_json bench_train_bf16_json train \
  'j["precision"]=="bf16" and j["bf16_backend"].endswith(("-bf16-emulated","bf16-blocked","-few-rows"))
   and abs(j["gflop_per_step"]-3*2464512e-9)<1e-6 and j["step_ms_median"]>0
   and abs(j["loss_first"]-math.log(300))<0.3 and j["loss_last"]<j["loss_first"]' \
  --config "$tmp/config.json" --batch 3 --seq 20 --steps 3 --warmup 1 --threads 1 --peak 100 --precision bf16
check_json bench_infer_bf16_json infer \
  'j["precision"]=="bf16" and j["head_rows"]==9 and j["step_ms_median"]>0' \
  --config "$tmp/config.json" --batch 3 --seq 20 --steps 2 --threads 2 --peak 100 --precision bf16
check_json bench_infer_fp32_json infer 'j["precision"]=="fp32"' \
  --config "$tmp/config.json" --batch 1 --seq 8 --steps 1 --threads 1 --peak 100 --precision fp32
check_json bench_sgemm_bf16_bt_json sgemm \
  'j["precision"]=="bf16" and j["backend"]==j["bf16_backend"] and j["b_bytes"]==2 and j["gflops_median"]>0
   and abs(j["peak_gflops"]-(j["dot_ratio"] if j["isa"]=="avx512bf16" else 1)*j["fma_peak_gflops"])<0.001*j["peak_gflops"]+0.05
   and abs(j["ms_median"]-2*16*200*64/(j["gflops_median"]*1e9)*1e3)<0.01*j["ms_median"]+1e-5' \
  --mnk 16,200,64 --bt --copies 3 --reps 4 --threads 2 --precision bf16
check_json bench_sgemm_bf16_at_json sgemm \
  'j["precision"]=="bf16" and j["b_bytes"]==4 and j["at"]==1 and j["gflops_median"]>0' \
  --mnk 40,30,20 --at --reps 3 --threads 1 --precision bf16
MASKD_ISA=generic check_json bench_sgemm_bf16_generic_json sgemm \
  'j["isa"]=="generic" and j["backend"]=="generic-bf16-emulated" and abs(j["peak_gflops"]-j["fma_peak_gflops"])<0.02' \
  --mnk 16,100,32 --bt --reps 2 --threads 1 --precision bf16
# The matrix products of a training step, listed shape by shape, must add up to the
# FLOP count above (two independent ways of counting the same step).
check_json bench_sgemm_shapes_json sgemm \
  'j["mode"]=="sgemm-shapes" and len(j["shapes"])==24 and abs(j["gflop_per_step"]-3*2464512e-9)<1e-6
   and all(s["gflops"]>0 for s in j["shapes"]) and j["matmul_ms_per_step"]>0' \
  --config "$tmp/config.json" --batch 3 --seq 20 --reps 2 --threads 1
check_json bench_sgemm_shapes_bf16_json sgemm \
  'j["mode"]=="sgemm-shapes" and j["precision"]=="bf16" and len(j["shapes"])==24
   and all(s["gflops"]>0 for s in j["shapes"])' \
  --config "$tmp/config.json" --batch 3 --seq 20 --reps 2 --threads 1 --precision bf16
bad sgemm_config_no_batch "--batch" sgemm --config tiny --seq 8
# The read bandwidth and the bound it puts on a few-row forward pass: the weights counted
# from the config (2 layers of 4*32*32 + 2*32*64, the head's 32*32 and the decoder's 300*32,
# 4 bytes each) and read at the measured rate.
check_json bench_memory_json memory \
  'j["threads"]==2 and j["read_gb_s_1_thread"]>0.1 and j["read_gb_s"]>0.1
   and j["weight_bytes"]==4*(2*(4*32*32+2*32*64)+32*32+300*32)
   and abs(j["forward_bound_ms"]-j["weight_bytes"]/(j["read_gb_s"]*1e9)*1e3)<1e-3*j["forward_bound_ms"]+1e-6' \
  --config "$tmp/config.json" --reps 2 --threads 2
bad memory_missing_config "nonexistent" memory --config "$tmp/nonexistent.json"
