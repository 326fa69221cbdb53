#!/usr/bin/env bash
# A run trained in another pid namespace (a container sharing the store's folder) is alive
# to the processes outside it: its pid means nothing there (it is pid 1 in its namespace,
# and the host's pid 1 is another process), so the store judged it gone. Another training
# on the same store marked it "interrupted" while it trained on, and a resume from outside
# claimed it and trained it a second time at once. Now the process running a run holds a
# lock on the run's byte of DB-alive, which the kernel releases when it ends, seen from
# every namespace. Once it is killed the run is recovered as before.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" run_alive "${1:-}"
[ -f "$DATA/train.txt" ] || { fail run_alive_setup "no WikiText-2 at $DATA"; exit 1; }
if ! unshare --pid --fork --mount-proc true 2>"$T/unshare.err"; then
  fail run_alive_setup "cannot make a pid namespace (unshare, as root): $(head -c 200 "$T/unshare.err")"
  exit 1
fi
small_training_setup run_alive_setup 200000 || exit 1
common=(--tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" --batch 8 --threads 1 --quiet)
status() { sqlite3 "$T/a.db" "SELECT status FROM runs WHERE name = '$1'" 2>/dev/null; }

# The run in a pid namespace of its own, long enough to outlast the checks, opening the store
# through a link to its file: its lock is taken beside the file SQLite opens (as -wal is), not
# beside the link, where the others would not look.
"$M" train --db "$T/a.db" --name first "${common[@]}" --max-steps 1 2>"$T/first.err" ||
  fail run_alive_first_run "$(tail -1 "$T/first.err")"
ln -s "$T/a.db" "$T/link.db"
unshare --pid --fork --mount-proc --kill-child "$M" train --db "$T/link.db" --name ns "${common[@]}" --epochs 500 \
  --checkpoint-steps 100000 2>"$T/ns.err" &
upid=$!
at_exit "kill -9 $upid 2>/dev/null"
wait_until 600 0.05 eval '[ "$(status ns)" = running ]'
rpid=$(sqlite3 "$T/a.db" "SELECT pid FROM runs WHERE name = 'ns'")
[ "$(status ns)" = running ] && [ "$rpid" = 1 ] && pass run_alive_namespaced_run_records_its_own_pid ||
  fail run_alive_namespaced_run_records_its_own_pid "status '$(status ns)', pid '$rpid' (want running, 1): $(tail -2 "$T/ns.err")"

# Another training on the store recovers the runs whose process is gone as it starts.
"$M" train --db "$T/a.db" --name other "${common[@]}" --max-steps 1 2>"$T/other.err" ||
  fail run_alive_other_run "$(tail -1 "$T/other.err")"
[ "$(status ns)" = running ] && kill -0 "$upid" 2>/dev/null && pass run_alive_other_run_leaves_it_running ||
  fail run_alive_other_run_leaves_it_running "status '$(status ns)' while it trains on in its namespace"

# A resume from outside is refused: the run is running.
out=$(timeout 20 "$M" train --db "$T/a.db" --resume ns --quiet 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "still running\|already running" <<<"$out" && pass run_alive_resume_from_outside_refused ||
  fail run_alive_resume_from_outside_refused "rc $rc (124: it trained the run a second time): $(head -c 300 <<<"$out")"

# Killed (the namespace's pid 1: everything in it ends), the run is recovered as before.
{ kill -9 "$upid"; wait "$upid"; } 2>/dev/null
wait_until 100 0.05 eval '! pgrep -f "train --db $T/link.db --name ns" >/dev/null'
"$M" train --db "$T/a.db" --name third "${common[@]}" --max-steps 1 2>"$T/third.err" ||
  fail run_alive_third_run "$(tail -1 "$T/third.err")"
[ "$(status ns)" = interrupted ] && pass run_alive_killed_run_recovered ||
  fail run_alive_killed_run_recovered "status '$(status ns)' after its namespace ended (want interrupted)"
