#!/usr/bin/env bash
# libfabric's verbs provider (libfabric-bin's fi_pingpong), unmodified, on
# softverbs0: its MSG endpoints connect through our librdmacm.so.1
# (rdma_getaddrinfo from hints, synchronous ids, rdma_create_ep).
#   msg: `-p verbs -e msg`, once.
#   rdm: `-p "verbs;ofi_rxm" -e rdm`, the reliable-datagram layer over those
#        MSG endpoints, five times: its server tears the connection down on
#        DISCONNECTED, which once lost the client's last message
#        (src/cm/held_disconnect.h).
# Usage: libfabric.sh <dir of our librdmacm.so.1> msg|rdm
set -euo pipefail
libdir=$1
mode=$2
export LD_LIBRARY_PATH=$libdir
export SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-fi-$mode-$$
command -v fi_pingpong >/dev/null || { echo "SKIP: libfabric-bin is not installed (scripts/deps.sh)"; exit 77; }
pids=()
work=$(mktemp -d)
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$work" "$SOFTVERBS_DEVICE_PATH" "$SOFTVERBS_DEVICE_PATH.sysfs" "$SOFTVERBS_DEVICE_PATH.cm"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# fi_pingpong's out-of-band TCP port, free on this host.
. "$(dirname "$0")/ports.sh"
case $mode in
  msg) args=(-p verbs -e msg -I 20 -S 1024) rounds=1 ;;
  rdm) args=(-p "verbs;ofi_rxm" -e rdm -I 20 -S 1024) rounds=5 ;;
  *) echo "unknown mode $mode" >&2; exit 2 ;;
esac
for round in $(seq "$rounds"); do
  port=$(free_tcp_port $(( 4000 + round )))
  timeout 60 fi_pingpong "${args[@]}" -B "$port" >"$work/server.out" 2>&1 &
  server=$!
  pids+=("$server")
  for _ in $(seq 100); do
    [ -n "$(ss -Hltn "( sport = :$port )" 2>/dev/null)" ] && break
    sleep 0.05
  done
  timeout 60 fi_pingpong "${args[@]}" -P "$port" 127.0.0.1 >"$work/client.out" 2>&1 || fail "client: $(cat "$work/client.out")"
  wait "$server" || fail "server: $(cat "$work/server.out")"
  grep -qE '^1k +20 +=20 ' "$work/client.out" || fail "client printed: $(cat "$work/client.out")"
done
echo "fi_pingpong ${args[*]:0:4}: $rounds x 20 round trips of 1 KiB"
