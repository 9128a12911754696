# netns.sh - pretend servers for the multi-server tests and benchmarks: network namespaces
# joined by veth pairs to a bridge that lives in a namespace of its own, so nothing is added
# to the machine's own network. Sourced, not run:
#
#   . tests/multi/netns.sh
#   netns_up 2            # servers hcs<id>_0, hcs<id>_1 at $NETNS_NET.1, $NETNS_NET.2
#   netns_up_or_exit 2    # the same, or the test ends: 77 (skipped) / 1 (failed)
#   netns_exec 1 cmd ...  # runs cmd inside server 1
#   netns_down            # also run by the EXIT trap netns_up sets
#   port=$(netns_port)    # a random master port to count up from
#
# Needs root and iproute2. netns_up returns 77 (with the reason on stderr) where namespaces
# cannot be made, so callers can skip. Traffic stays on the addresses made here.

NETNS_ID=${NETNS_ID:-$$}
# Namespace and veth names: NETNS_PREFIX_<k>, NETNS_PREFIX_sw; <NETNS_VETH>s<k> / p<k> (at most
# 15 characters). A caller may choose its own, to keep clear of other jobs on the machine.
NETNS_PREFIX=${NETNS_PREFIX:-hcs${NETNS_ID}}
NETNS_VETH=${NETNS_VETH:-h${NETNS_ID}}
# A /24 of its own per test process, inside the namespaces only; more than 250 servers take
# a /16 (10.232.k/250.k%250+1), which is as private: each set of namespaces has its own bridge.
NETNS_NET=${NETNS_NET:-10.231.$((NETNS_ID % 250)).}
NETNS_COUNT=0
NETNS_WIDE=0

# A random port to start a job's master ports at, below the kernel's ephemeral ports (32768 and
# up), which a closing link may still hold: npu-launch refuses a master port in use.
netns_port() { echo $((20000 + RANDOM % 12000)); }

netns_addr() {
  if [ "$NETNS_WIDE" = 1 ]; then echo "10.232.$(($1 / 250)).$(($1 % 250 + 1))"; else echo "${NETNS_NET}$(($1 + 1))"; fi
}

netns_exec() {
  local k=$1
  shift
  ip netns exec "${NETNS_PREFIX}_$k" "$@"
}

netns_down() {
  local k
  for ((k = 0; k < NETNS_COUNT; k++)); do
    ip netns del "${NETNS_PREFIX}_$k" 2>/dev/null
  done
  ip netns del "${NETNS_PREFIX}_sw" 2>/dev/null
  NETNS_COUNT=0
  return 0
}

# netns_up_or_exit N: netns_up N, or ends the calling test, saying why: exit 77 (skipped) where
# namespaces cannot be made, exit 1 when making them failed.
netns_up_or_exit() {
  netns_up "$1"
  local rc=$?
  [ $rc = 77 ] && { echo "SKIP: network namespaces cannot be made here"; exit 77; }
  [ $rc = 0 ] || { echo "FAIL: could not set up $1 pretend servers"; exit 1; }
}

netns_up() {
  local n=$1 k sw="${NETNS_PREFIX}_sw"
  if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    echo "netns: needs root and iproute2 (ip) to make network namespaces" >&2
    return 77
  fi
  if ! ip netns add "$sw" 2>/dev/null; then
    echo "netns: 'ip netns add' failed here (no permission for network namespaces?)" >&2
    return 77
  fi
  trap netns_down EXIT
  local mask=24
  NETNS_WIDE=0
  [ "$n" -gt 250 ] && NETNS_WIDE=1 mask=16
  ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || return 1
  for ((k = 0; k < n; k++)); do
    local ns="${NETNS_PREFIX}_$k"
    ip netns add "$ns" || return 1
    NETNS_COUNT=$((k + 1))
    ip link add "${NETNS_VETH}s$k" type veth peer name "${NETNS_VETH}p$k" || return 1
    ip link set "${NETNS_VETH}s$k" netns "$ns" || return 1
    ip link set "${NETNS_VETH}p$k" netns "$sw" || return 1
    ip -n "$ns" link set "${NETNS_VETH}s$k" name eth0 || return 1
    ip -n "$ns" addr add "$(netns_addr "$k")/$mask" dev eth0 || return 1
    ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || return 1
    ip -n "$sw" link set "${NETNS_VETH}p$k" master br0 && ip -n "$sw" link set "${NETNS_VETH}p$k" up ||
      return 1
  done
  netns_static_neighbours "$n"
}

# Every server knows every other's MAC address from the start (permanent neighbour entries).
# Real servers each have an ARP table of their own; these namespaces share the kernel's one
# table, whose gc_thresh3 (1024 by default) counts the entries of all of them: a full mesh of
# 33 or more servers (n(n-1) > 1024) overflowed it ("neighbour: arp_cache: neighbor table
# overflow!"), new neighbours went unresolved and SYNs were retried with back-off, so a
# 64-server job took minutes. Permanent entries are exempt from that limit.
netns_static_neighbours() {
  local n=$1 k j
  local -a mac
  for ((k = 0; k < n; k++)); do
    mac[k]=$(ip -n "${NETNS_PREFIX}_$k" -o link show eth0 | grep -o 'link/ether [0-9a-f:]*' |
      cut -d' ' -f2) || return 1
  done
  for ((k = 0; k < n; k++)); do
    for ((j = 0; j < n; j++)); do
      [ "$j" = "$k" ] || echo "neigh replace $(netns_addr "$j") lladdr ${mac[j]} dev eth0 nud permanent"
    done | ip -n "${NETNS_PREFIX}_$k" -batch - || return 1
  done
}
