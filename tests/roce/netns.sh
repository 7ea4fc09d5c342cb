#!/usr/bin/env bash
# Two "hosts" for RoCE tests: network namespaces joined by a veth pair, made
# and removed by the test itself. Sourced by the RoCE test scripts.
#
#   netns_up            creates sv-a-<pid> (10.77.<n>.1, fd77:<n>::1) and sv-b-<pid> (.2, ::2)
#   in_a CMD... / in_b  runs a command in a namespace
#   netns_down          kills every process the test started (by PID) and removes both
#   wait_listen NS PORT PID  waits until NS (in_a / in_b) listens on TCP PORT, while PID lives
#
# Exits 77 (ctest: skipped) with a clear message where `ip netns` is not permitted.

NETNS_A="sv-a-$$"
NETNS_B="sv-b-$$"
NETNS_SUBNET=$(( ($$ % 200) + 20 ))
ADDR_A="10.77.${NETNS_SUBNET}.1"
ADDR_B="10.77.${NETNS_SUBNET}.2"
ADDR6_A="fd77:${NETNS_SUBNET}::1"
ADDR6_B="fd77:${NETNS_SUBNET}::2"
NETNS_PIDS=()

netns_down() {
  local pid
  for pid in "${NETNS_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${NETNS_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  # Anything still inside (a child of a child) goes with its namespace.
  for ns in "$NETNS_A" "$NETNS_B"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns del "$ns" 2>/dev/null || true
  done
  return 0
}

netns_up() {
  if ! ip netns add "$NETNS_A" 2>/dev/null; then
    echo "SKIP: 'ip netns add' is not permitted here (needs root / CAP_SYS_ADMIN)" >&2
    exit 77
  fi
  trap netns_down EXIT
  ip netns add "$NETNS_B"
  ip link add "va-$$" type veth peer name "vb-$$"
  ip link set "va-$$" netns "$NETNS_A"
  ip link set "vb-$$" netns "$NETNS_B"
  ip -n "$NETNS_A" addr add "$ADDR_A/24" dev "va-$$"
  ip -n "$NETNS_B" addr add "$ADDR_B/24" dev "vb-$$"
  ip -n "$NETNS_A" addr add "$ADDR6_A/64" dev "va-$$" nodad
  ip -n "$NETNS_B" addr add "$ADDR6_B/64" dev "vb-$$" nodad
  for ns in "$NETNS_A" "$NETNS_B"; do
    ip -n "$ns" link set lo up
  done
  # Jumbo frames, so that a 4096-byte path MTU fits in one datagram.
  ip -n "$NETNS_A" link set "va-$$" mtu "${VETH_MTU:-9000}"
  ip -n "$NETNS_B" link set "vb-$$" mtu "${VETH_MTU:-9000}"
  ip -n "$NETNS_A" link set "va-$$" up
  ip -n "$NETNS_B" link set "vb-$$" up
}

in_a() { ip netns exec "$NETNS_A" "$@"; }
in_b() { ip netns exec "$NETNS_B" "$@"; }

# Starts a command in the background and records its PID for netns_down.
spawn() {
  "$@" &
  NETNS_PIDS+=("$!")
}

# A server's TCP rendezvous is up (Debian's pingpongs and perftest listen
# only once their device is open, and their clients do not retry a refused
# connect): wait_listen in_a|in_b <port> <server pid>. Fails when the server
# exits first or after 60 s; the caller's client then reports what it saw.
wait_listen() {
  local ns=$1 port=$2 pid=$3 _
  for _ in $(seq 1200); do
    [ -n "$($ns ss -Hltn "( sport = :$port )" 2>/dev/null)" ] && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
