# Two "hosts" on this machine: two network namespaces joined by a veth pair, for tests of
# MPI jobs across hosts (source it; needs root or CAP_NET_ADMIN, and iproute2).
#   netns_up PREFIX    creates namespaces PREFIX-a and PREFIX-b, the veth pair between them
#                      (PREFIX-va in A, PREFIX-vb in B; PREFIX at most 12 characters) with
#                      $NETNS_NET.1/24 on A's end and $NETNS_NET.2/24 on B's (NETNS_NET,
#                      default 10.213.77, may be set before), lo up in both, and an rsh agent
#                      script for mpirun in a temporary folder. Sets NETNS_A, NETNS_B (names),
#                      NETNS_ADDR_A, NETNS_ADDR_B, NETNS_IF_A, NETNS_IF_B, NETNS_CIDR and
#                      NETNS_AGENT. Status 1 with a message on stderr when it cannot (not root,
#                      no CAP_NET_ADMIN, no `ip netns`, a namespace of that name already there);
#                      what it made by then is removed.
#   netns_down         removes the namespaces (and so the veth pair) and the agent's folder;
#                      idempotent, safe to call from a trap. Call it on EXIT (and INT/TERM).
#   netns_exec NS COMMAND...
#                      runs COMMAND in namespace NS (NETNS_A or NETNS_B) with the hostname NS,
#                      in a UTS namespace of its own, as the agent runs host B's daemon: each
#                      "host" has its own name, as real hosts do (Open MPI's messages and
#                      MPI_Get_processor_name then name it).
#   netns_mpi_env      exports, and prints as KEY=VALUE lines, the OMPI_* variables with which
#                      an mpirun started in namespace A (`netns_exec "$NETNS_A" mpirun
#                      --host "$NETNS_ADDR_A,$NETNS_ADDR_B" ...`) starts host B's daemon
#                      through the agent and carries all traffic (out-of-band and MPI) over
#                      TCP on the veth pair only, never shared memory.
# The agent is called as ssh would be: `agent [ssh options] HOST WORD...`; it joins the
# words with spaces (as ssh does for the remote shell) and runs them with `sh -c` inside
# the namespace that owns HOST's address (with that namespace's hostname, see netns_exec),
# keeping the caller's environment. The namespaces share the file system (and /tmp, /dev/shm):
# Open MPI tells the hosts apart by the addresses given to --host, and shared memory is
# never used between them (btl self,tcp).

NETNS_A='' NETNS_B='' NETNS_ADDR_A='' NETNS_ADDR_B='' NETNS_IF_A='' NETNS_IF_B=''
NETNS_AGENT='' NETNS_CIDR='' netns_dir=''

netns_up() {
  local p=${1:?netns_up PREFIX}
  local net=${NETNS_NET:-10.213.77}
  if [ "${#p}" -gt 12 ]; then echo "netns_up: prefix '$p' longer than 12 characters" >&2; return 1; fi
  if ! ip netns list >/dev/null 2>&1; then
    echo "netns_up: 'ip netns' does not work here (iproute2 missing?)" >&2; return 1
  fi
  if ip netns list | grep -Eq "^($p-a|$p-b)( |\$)"; then
    echo "netns_up: namespace $p-a or $p-b already exists (left by an earlier run? remove with: ip netns del $p-a; ip netns del $p-b)" >&2
    return 1
  fi
  NETNS_A=$p-a NETNS_B=$p-b NETNS_IF_A=$p-va NETNS_IF_B=$p-vb
  NETNS_ADDR_A=$net.1 NETNS_ADDR_B=$net.2 NETNS_CIDR=$net.0/24
  local err
  if ! err=$(ip netns add "$NETNS_A" 2>&1); then
    NETNS_A='' NETNS_B=''
    echo "netns_up: cannot create network namespace $p-a (needs root / CAP_NET_ADMIN, uid $(id -u)): $err" >&2
    return 1
  fi
  if ! err=$(ip netns add "$NETNS_B" 2>&1 &&
      ip link add "$NETNS_IF_A" netns "$NETNS_A" type veth peer name "$NETNS_IF_B" netns "$NETNS_B" 2>&1 &&
      ip -n "$NETNS_A" addr add "$NETNS_ADDR_A/24" dev "$NETNS_IF_A" 2>&1 &&
      ip -n "$NETNS_B" addr add "$NETNS_ADDR_B/24" dev "$NETNS_IF_B" 2>&1 &&
      ip -n "$NETNS_A" link set lo up 2>&1 && ip -n "$NETNS_B" link set lo up 2>&1 &&
      ip -n "$NETNS_A" link set "$NETNS_IF_A" up 2>&1 && ip -n "$NETNS_B" link set "$NETNS_IF_B" up 2>&1); then
    echo "netns_up: cannot set up namespaces $NETNS_A/$NETNS_B and their veth pair: $err" >&2
    netns_down
    return 1
  fi
  netns_dir=$(mktemp -d "${TMPDIR:-/tmp}/netns-$p.XXXXXX") || { netns_down; return 1; }
  NETNS_AGENT=$netns_dir/agent
  # The agent: skip ssh-style options, map HOST to its namespace, run the words in sh.
  cat >"$NETNS_AGENT" <<EOF
#!/bin/sh
# rsh agent for Open MPI (made by tests/netns.sh): agent [options] HOST COMMAND...
while [ \$# -gt 0 ]; do
  case "\$1" in
    -[bcDeFIiLlmOopRSWw]) shift 2 ;;   # ssh options that take a value
    -*) shift ;;
    *) break ;;
  esac
done
host=\$1; shift
case "\$host" in
  $NETNS_ADDR_A|$NETNS_A) ns=$NETNS_A ;;
  $NETNS_ADDR_B|$NETNS_B) ns=$NETNS_B ;;
  *) echo "netns agent: unknown host \$host (knows $NETNS_ADDR_A, $NETNS_ADDR_B)" >&2; exit 255 ;;
esac
[ -n "\${NETNS_AGENT_LOG:-}" ] && echo "\$host -> \$ns: \$*" >>"\$NETNS_AGENT_LOG"
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$0" && exec sh -c "\$1"' "\$ns" "\$*"
EOF
  chmod +x "$NETNS_AGENT"
}

netns_exec() {  # NS COMMAND...: COMMAND in namespace NS, with hostname NS (in its own UTS namespace)
  local ns=$1; shift
  ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$ns" "$@"
}

netns_down() {
  local n
  for n in "$NETNS_A" "$NETNS_B"; do
    [ -n "$n" ] || continue
    # Processes still in a namespace (a daemon left by a killed mpirun) keep its network
    # alive after `ip netns del`; end them first.
    local pids
    pids=$(ip netns pids "$n" 2>/dev/null)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    ip netns del "$n" 2>/dev/null
  done
  [ -n "$netns_dir" ] && rm -rf "$netns_dir"
  netns_dir='' NETNS_AGENT=''
  return 0
}

netns_mpi_env() {
  local kv
  for kv in \
    "OMPI_MCA_plm_rsh_agent=$NETNS_AGENT" \
    OMPI_MCA_btl=self,tcp \
    "OMPI_MCA_btl_tcp_if_include=$NETNS_CIDR" \
    "OMPI_MCA_oob_tcp_if_include=$NETNS_CIDR" \
    OMPI_MCA_pml=ob1 \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; do
    export "${kv?}"
    echo "$kv"
  done
}
