#!/usr/bin/env bash
# Two "hosts" on one machine (tests/netns.sh): an MPI job of 2 ranks started by mpirun in
# network namespace A, rank 1 launched on host B (namespace B) through the rsh agent, all
# traffic over TCP on the veth pair between them. A fixture MPI program (compiled here with
# mpicc, not part of the build) reports each rank's network namespace, address and host
# name and checks an MPI_Allreduce of 1e6 floats and an MPI_Sendrecv ring of 1e6 ints.
# Checks: rank 0 in A and rank 1 in B (different namespaces, each its own veth address and
# hostname), both results right; a run whose host B cannot reach host A (B's veth down)
# and one naming an address on no namespace both fail within 30 s with a message naming
# the host; nothing with the test's prefix (namespaces, links, processes) remains after.
# Needs root (or CAP_NET_ADMIN), iproute2, unshare and Open MPI; without them it FAILS.
# MASKD_NETNS_HOLD=SECONDS makes each rank sleep that long before exiting (to try an
# interrupt by hand: the namespaces must be gone after kill -INT / -TERM of this script).
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/../lib.sh" netns_mpi "${1:-}"
# shellcheck source=tests/netns.sh
. tests/netns.sh

prefix=mkd$$
# Clean-up on every way out: lib.sh's EXIT trap runs at_exit; INT/TERM exit (through it).
at_exit netns_down
trap 'exit 130' INT
trap 'exit 143' TERM
for c in mpirun mpicc ip unshare; do
  command -v "$c" >/dev/null || { fail netns_setup "$c not found (Open MPI: openmpi-bin libopenmpi-dev; iproute2; util-linux)"; exit 1; }
done

cat >"$T/hello.c" <<'EOF'
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define N 1000000
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, hl;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[MPI_MAX_PROCESSOR_NAME];
  MPI_Get_processor_name(host, &hl);
  struct stat st;
  unsigned long ino = stat("/proc/self/ns/net", &st) == 0 ? (unsigned long)st.st_ino : 0;
  char addrs[256] = "";
  struct ifaddrs *ifa, *i;
  if (getifaddrs(&ifa) == 0) {
    for (i = ifa; i; i = i->ifa_next)
      if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && strcmp(i->ifa_name, "lo") != 0) {
        char b[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, b, sizeof b);
        if (strlen(addrs) + strlen(b) + 2 < sizeof addrs) { if (*addrs) strcat(addrs, ","); strcat(addrs, b); }
      }
    freeifaddrs(ifa);
  }
  float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  int *s = malloc(N * sizeof *s), *r = malloc(N * sizeof *r);
  if (!x || !y || !s || !r) MPI_Abort(MPI_COMM_WORLD, 2);
  for (int k = 0; k < N; k++) x[k] = (float)(rank + 1) * (float)(k % 1000);
  MPI_Allreduce(x, y, N, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  float f = (float)(size * (size + 1) / 2);
  long bad = 0, badsr = 0;
  for (int k = 0; k < N; k++) if (y[k] != f * (float)(k % 1000)) bad++;
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int k = 0; k < N; k++) s[k] = rank * 7 + k;
  MPI_Sendrecv(s, N, MPI_INT, right, 1, r, N, MPI_INT, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  for (int k = 0; k < N; k++) if (r[k] != left * 7 + k) badsr++;
  printf("rank %d size %d host %s netns %lu addr %s allreduce %s sendrecv %s\n", rank, size, host, ino,
         addrs, bad ? "BAD" : "ok", badsr ? "BAD" : "ok");
  fflush(stdout);
  if (argc > 1) sleep((unsigned)atoi(argv[1]));
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return bad || badsr;
}
EOF
mpicc -O2 -o "$T/hello" "$T/hello.c" 2>"$T/cc.err" || { fail netns_setup "mpicc failed: $(tail -3 "$T/cc.err")"; exit 1; }

if ! netns_up "$prefix" 2>"$T/up.err"; then
  fail netns_namespaces "cannot create network namespaces (run as root / with CAP_NET_ADMIN): $(cat "$T/up.err")"
  exit 1
fi
pass netns_namespaces
netns_mpi_env >"$T/env"

# mpirun in A, in the background so that a signal to this script is handled at once.
mpi() {  # OUT TIMEOUT HOSTS ARGS...: runs the fixture; its status
  local out=$1 limit=$2 hosts=$3; shift 3
  timeout -k 5 "$limit" bash -c '. tests/netns.sh; netns_exec "$@"' netns \
    "$NETNS_A" mpirun -np 2 --host "$hosts" "$T/hello" "$@" >"$out" 2>&1 &
  local p=$!
  wait "$p"
}

start=$(date +%s.%N)
mpi "$T/run.out" 120 "$NETNS_ADDR_A,$NETNS_ADDR_B" ${MASKD_NETNS_HOLD:+"$MASKD_NETNS_HOLD"}; rc=$?
secs=$(echo "$(date +%s.%N) - $start" | bc)
echo "# two-host run: status $rc in ${secs}s"
sed 's/^/# /' "$T/run.out"
ino_a=$(stat -L -c %i "/run/netns/$NETNS_A") ino_b=$(stat -L -c %i "/run/netns/$NETNS_B")
r0=$(grep '^rank 0 ' "$T/run.out") r1=$(grep '^rank 1 ' "$T/run.out")
if [ "$rc" = 0 ] && [ -n "$r0" ] && [ -n "$r1" ]; then pass netns_mpi_run
else fail netns_mpi_run "status $rc: $(tail -5 "$T/run.out" | tr '\n' ' ')"; fi
if [[ "$r0" == "rank 0 size 2 host $NETNS_A netns $ino_a addr $NETNS_ADDR_A "* ]]; then pass netns_rank0_in_a
else fail netns_rank0_in_a "want netns $ino_a addr $NETNS_ADDR_A host $NETNS_A, got: $r0"; fi
if [[ "$r1" == "rank 1 size 2 host $NETNS_B netns $ino_b addr $NETNS_ADDR_B "* ]] && [ "$ino_a" != "$ino_b" ]; then
  pass netns_rank1_in_b
else fail netns_rank1_in_b "want netns $ino_b addr $NETNS_ADDR_B host $NETNS_B, got: $r1"; fi
if [[ "$r0" == *"allreduce ok sendrecv ok" && "$r1" == *"allreduce ok sendrecv ok" ]]; then pass netns_allreduce_sendrecv
else fail netns_allreduce_sendrecv "rank 0: $r0 / rank 1: $r1"; fi

# Host B cannot reach host A: B's end of the pair down. mpirun must fail, in bounded time,
# naming the host whose daemon could not connect.
ip -n "$NETNS_B" link set "$NETNS_IF_B" down
start=$(date +%s.%N)
mpi "$T/down.out" 30 "$NETNS_ADDR_A,$NETNS_ADDR_B"; rc=$?
secs=$(echo "$(date +%s.%N) - $start" | bc)
echo "# host B's link down: status $rc in ${secs}s; mpirun says:"
grep -vE '^-+$|^ *$' "$T/down.out" | head -12 | sed 's/^/#   /'
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ] && grep -q "$NETNS_B" "$T/down.out" &&
   grep -q 'unable to reliably start' "$T/down.out"; then pass netns_unreachable_fails
else fail netns_unreachable_fails "status $rc (124/137: timed out), want non-zero naming $NETNS_B: $(tail -3 "$T/down.out" | tr '\n' ' ')"; fi
ip -n "$NETNS_B" link set "$NETNS_IF_B" up

# A host address on no namespace (inside the pair's /24): the agent refuses it, as ssh
# would fail to connect, and mpirun fails.
bad=${NETNS_ADDR_A%.*}.3
mpi "$T/bad.out" 30 "$NETNS_ADDR_A,$bad"; rc=$?
echo "# host $bad (no namespace): status $rc; says:"
grep -vE '^-+$|^ *$' "$T/bad.out" | head -3 | sed 's/^/#   /'
if [ "$rc" != 0 ] && [ "$rc" != 124 ] && [ "$rc" != 137 ] && grep -q "$bad" "$T/bad.out"; then pass netns_unknown_host_fails
else fail netns_unknown_host_fails "status $rc, want non-zero naming $bad: $(tail -3 "$T/bad.out" | tr '\n' ' ')"; fi

# Everything removed: no namespace, link or process of the prefix left.
netns_down
left=$(ip netns list | grep "^$prefix-"; ip -o link | grep -F "$prefix-"; ls /run/netns 2>/dev/null | grep "^$prefix-")
procs=$(pgrep -f "$T/hello" ; pgrep -f "netns-$prefix")
if [ -z "$left" ] && [ -z "$procs" ]; then pass netns_cleaned_up
else fail netns_cleaned_up "left: $left; processes: $procs"; fi
