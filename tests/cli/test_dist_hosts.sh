#!/usr/bin/env bash
# Data-parallel training across two hosts: two network namespaces made here (a veth pair
# with addresses only on it, tests/netns.sh), `maskd train --hosts A:1,B:1` started in
# namespace A, mpirun starting host B's rank through an agent that enters namespace B
# (plm_rsh_agent, instead of ssh), MPI over TCP on the pair. The run gives the same bits
# as the 2-rank run on one host. Without the right to make namespaces (not root) this
# test says so and fails.
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" dist_hosts "${1:-}"
# shellcheck source=tests/netns.sh
. "$(dirname "$0")/../netns.sh"
[ -f "$DATA/train.txt" ] || { fail dist_hosts_setup "no WikiText-2 at $DATA"; exit 1; }
command -v mpirun >/dev/null || { fail dist_hosts_setup "mpirun is missing (scripts/setup installs openmpi-bin)"; exit 1; }
at_exit netns_down
if ! netns_up "mkh$$" 2>"$T/up.err"; then
  fail dist_hosts_namespaces "cannot make two hosts of network namespaces: $(tail -1 "$T/up.err")"
  exit 1
fi
pass dist_hosts_namespaces
netns_mpi_env >/dev/null

small_training_setup dist_hosts_setup 120000 || exit 1
args=(--name h --tokenizer "$T/tok.json" --train "$T/train" --config "$T/cfg.json" --max-steps 40 --batch 8
      --lr 2e-3 --threads 1 --seed 5)
dump() {
  sqlite3 "$1" "SELECT step, printf('%.17e %.17e', loss, grad_norm) FROM step_metrics ORDER BY step;
                SELECT weights FROM revisions ORDER BY seq DESC LIMIT 1;"
}

# The same run on one host (plain loopback environment, no namespace variables).
env -u OMPI_MCA_plm_rsh_agent -u OMPI_MCA_btl -u OMPI_MCA_btl_tcp_if_include -u OMPI_MCA_oob_tcp_if_include \
  "$M" train --db "$T/one.db" "${args[@]}" --ranks 2 --quiet 2>"$T/one.err" ||
  { fail dist_hosts_one_host_run "$(tail -3 "$T/one.err")"; exit 1; }
timeout -k 5 300 bash -c '. tests/netns.sh; netns_exec "$@"' netns "$NETNS_A" \
  "$M" train --db "$T/two.db" "${args[@]}" --hosts "$NETNS_ADDR_A:1,$NETNS_ADDR_B:1" 2>"$T/two.err"
rc=$?
[ $rc = 0 ] && pass dist_hosts_run || { fail dist_hosts_run "rc $rc: $(grep -v '^\s*$' "$T/two.err" | tail -4 | tr '\n' ' ')"; exit 1; }
grep -q "rank 0 on $NETNS_A, rank 1 on $NETNS_B" "$T/two.err" && pass dist_hosts_ranks_on_both_hosts ||
  fail dist_hosts_ranks_on_both_hosts "$(grep ranks "$T/two.err")"
dump "$T/one.db" > "$T/one.txt"; dump "$T/two.db" > "$T/two.txt"
[ "$(wc -l < "$T/one.txt")" -eq 41 ] && cmp -s "$T/one.txt" "$T/two.txt" && pass dist_hosts_same_bits_as_one_host ||
  fail dist_hosts_same_bits_as_one_host "$(diff "$T/one.txt" "$T/two.txt" | head -3 | tr '\n' ' ')"

# Hosts that leave this machine out: rank 0, which alone writes the store, would run on host
# B and write B's store (here the shared file system's: the run went through, rank 0 on B).
# Refused before mpirun; listed anywhere (second here), this machine gets rank 0.
out=$(timeout -k 5 120 bash -c '. tests/netns.sh; netns_exec "$@"' netns "$NETNS_A" \
  "$M" train --db "$T/away.db" "${args[@]}" --name h3 --max-steps 2 --hosts "$NETNS_ADDR_B:2" 2>&1); rc=$?
[ $rc = 2 ] && [ "$(grep -c . <<<"$out")" = 1 ] &&
  grep -q "^maskd train: --hosts $NETNS_ADDR_B:2: no host is this machine ($NETNS_A), where the store is" <<<"$out" &&
  pass dist_hosts_without_this_machine_refused || fail dist_hosts_without_this_machine_refused "rc $rc: $(head -c 300 <<<"$out")"
out=$(timeout -k 5 120 bash -c '. tests/netns.sh; netns_exec "$@"' netns "$NETNS_A" \
  "$M" train --db "$T/second.db" "${args[@]}" --name h4 --max-steps 2 --hosts "$NETNS_ADDR_B:1,$NETNS_ADDR_A:1" 2>&1); rc=$?
[ $rc = 0 ] && grep -q "rank 0 on $NETNS_A, rank 1 on $NETNS_B" <<<"$out" && pass dist_hosts_this_machine_listed_second_gets_rank0 ||
  fail dist_hosts_this_machine_listed_second_gets_rank0 "rc $rc: $(grep -v '^\s*$' <<<"$out" | tail -3 | tr '\n' ' ')"

# A host whose name does not resolve: one line naming it, at once (mpirun's agent failed on
# it, then "the ranks ended with status 255" after 5 s of waiting for a rank 0 that never
# ran). Nothing leaves the machine: .invalid names are never looked up, and namespace A has
# no route to a name server (the .example name's lookup fails there).
for h in nosuchhost.invalid nosuchhost.example; do
  t0=$(date +%s%N)
  out=$(timeout -k 5 120 bash -c '. tests/netns.sh; netns_exec "$@"' netns "$NETNS_A" \
    "$M" train --db "$T/nohost.db" "${args[@]}" --name h5 --hosts "$NETNS_ADDR_A:1,$h:1" 2>&1); rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(grep -c . <<<"$out")" = 1 ] && [ $ms -lt 3000 ] &&
    grep -q "^maskd train: host $h cannot be reached by mpirun: its name does not resolve" <<<"$out" &&
    pass "dist_hosts_unresolved_host_named_at_once[$h]" ||
    fail "dist_hosts_unresolved_host_named_at_once[$h]" "rc $rc in $ms ms: $(tail -3 <<<"$out" | tr '\n' ' ')"
done

# A host that cannot be reached (its end of the pair down): one clear failure, no hang,
# whose line names the host mpirun could not start its daemon on.
ip -n "$NETNS_B" link set "$NETNS_IF_B" down
out=$(timeout -k 5 120 bash -c '. tests/netns.sh; netns_exec "$@"' netns "$NETNS_A" \
  "$M" train --db "$T/bad.db" "${args[@]}" --name h2 --hosts "$NETNS_ADDR_A:1,$NETNS_ADDR_B:1" 2>&1); rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "$NETNS_B\|$NETNS_ADDR_B\|unable" <<<"$out" && pass dist_hosts_unreachable_fails ||
  fail dist_hosts_unreachable_fails "rc $rc: $(tail -3 <<<"$out" | tr '\n' ' ')"
grep -q "^maskd train: mpirun could not start 2 ranks: .*(the hosts other than this machine: $NETNS_ADDR_B)" <<<"$out" &&
  pass dist_hosts_unreachable_names_the_host || fail dist_hosts_unreachable_names_the_host "$(grep -v '^-*$' <<<"$out" | tail -3 | tr '\n' ' ')"
