#!/usr/bin/env bash
# maskd serve --cache N with more models in use than N: a request for a model that is
# not loaded waits for a cached one to become idle (its place is taken before the load),
# instead of loading it, finding every place busy and answering 503 (about 15% of
# requests with --cache 2 and three models). Three small models that answer differently,
# asked by 16 clients at once, round robin, under --cache 1 and --cache 2: every request
# is answered 200 with its own model's answer (as asked alone).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" servecache
export OMP_NUM_THREADS=1
serve_wrap=(timeout 300)
small_training_setup serve_cache_setup 60000 || exit 1
for i in 1 2 3; do
  "$M" train --db "$T/c.db" --name "m$i" --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" \
    --max-steps 12 --batch 8 --lr 3e-3 --threads 1 --seed "$i" --quiet >"$T/setup.log" 2>&1 ||
    { fail serve_cache_setup "$(tail -2 "$T/setup.log")"; exit 1; }
done

# CLIENTS concurrent clients send ROUNDS requests each, model m(1 + k % 3) for the k-th;
# every answer must be 200 and equal to that model's answer asked alone (first pass).
cat > "$T/clients.py" <<'EOF'
import json, sys, threading, urllib.request, urllib.error
base, clients, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
text = "The [MASK] of the city ."
def ask(model):
    body = json.dumps({"inputs": text, "model": model, "parameters": {"top_k": 3}}).encode()
    req = urllib.request.Request(base + "/fill-mask", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r: return r.status, r.read().decode()
    except urllib.error.HTTPError as e: return e.code, e.read().decode()
alone = {}
for m in ("m1", "m2", "m3"):
    st, b = ask(m)
    if st != 200: print(f"{m} alone: {st} {b[:200]}"); sys.exit(0)
    alone[m] = b
if len(set(alone.values())) != 3: print("the three models answer alike: the check could not tell them apart"); sys.exit(0)
bad, lock = [], threading.Lock()
def client(c):
    for r in range(rounds):
        m = "m%d" % (1 + (c + r) % 3)
        st, b = ask(m)
        if st != 200 or b != alone[m]:
            with lock: bad.append(f"{m}: {st} {b[:160]}")
ts = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
for t in ts: t.start()
for t in ts: t.join()
print("ok" if not bad else f"{len(bad)} of {clients * rounds} requests: {bad[0]}")
EOF

for n in 1 2; do
  serve_start --db "$T/c.db" --quiet --no-worker --cache "$n" || { fail "serve_cache_${n}_start" "$(tail -2 "$T/err")"; exit 1; }
  msg=$($PY "$T/clients.py" "$base" 16 12)
  [ "$msg" = ok ] && pass "serve_cache_${n}_three_models_every_request_answered" ||
    fail "serve_cache_${n}_three_models_every_request_answered" "${msg:-the clients crashed}"
  serve_stop
done
