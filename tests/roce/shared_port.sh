#!/usr/bin/env bash
# Several processes on one RoCE address share its UDP port: the first binds
# it and forwards the others' packets (src/fabric/udp/forwarder.h); when it
# exits, another takes the port over while its connections keep running.
#   shared_port.sh <dir of libibverbs.so.1> <rc_stress binary>
#
# Namespace A: three rc_stress servers on one device (one segment). The
# first binds the port; the second and third get theirs forwarded. The first
# is done after a short run and exits; the third, still running, must take
# the port over (the second is done by then or is too). Namespace B: the
# three clients on one device, sharing B's port the same way.
set -euo pipefail
lib=$1
bin=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns.sh"
netns_up
work=$(mktemp -d)
cleanup() { netns_down; rm -rf "$work"; rm -rf /dev/shm/softverbs-itest-sp-$$-*; }
trap cleanup EXIT

env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_A" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-sp-$$-a)
env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_B" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-sp-$$-b)
base=$(( 22000 + $$ % 20000 ))
ops=(2000 3000 15000)
servers=() clients=()
for i in 0 1 2; do
  in_a env "${env_a[@]}" timeout 120 "$bin" --server --port $((base + i)) > "$work/server$i.out" 2>&1 &
  NETNS_PIDS+=("$!"); servers+=("$!")
  # In order: the first server binds the port (rc_stress listens on TCP
  # once its device is open).
  wait_listen in_a $((base + i)) "$!" || true
done
for i in 0 1 2; do
  in_b env "${env_b[@]}" timeout 120 "$bin" --connect "$ADDR_A" --port $((base + i)) --ops "${ops[$i]}" --timeout 14 \
    > "$work/client$i.out" 2>&1 &
  NETNS_PIDS+=("$!"); clients+=("$!")
  sleep 0.2
done
rc=0
for i in 0 1 2; do
  wait "${clients[$i]}" || { echo "client $i failed"; rc=1; }
  wait "${servers[$i]}" || { echo "server $i failed"; rc=1; }
done
for i in 0 1 2; do echo "--- pair $i"; cat "$work/client$i.out" "$work/server$i.out"; done
[ $rc -eq 0 ] || { echo "FAIL"; exit 1; }
echo PASS
