#!/usr/bin/env bash
# Debian's perftest, unmodified, between two network namespaces over our RoCE
# device: exits 0 on both ends and reports a non-zero figure.
#   perftest.sh <dir of libibverbs.so.1> <tool> [extra perftest options...]
set -euo pipefail
lib=$1
tool=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns.sh"
netns_up
work=$(mktemp -d)
cleanup() { netns_down; rm -rf "$work"; rm -f /dev/shm/softverbs-itest-pt-$$-*; }
trap cleanup EXIT

port=$(( 21000 + $$ % 20000 ))
common=(-d softverbs_roce0 -x 0 -p "$port" -n 200 "$@")
env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_A" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-pt-$$-a)
env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_B" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-pt-$$-b)

in_a env "${env_a[@]}" timeout 60 "$tool" "${common[@]}" > "$work/server.out" 2>&1 &
NETNS_PIDS+=("$!")
server=$!
# The server listens once its device is open; the client retries the TCP connect.
sleep 0.5
rc=0
in_b env "${env_b[@]}" timeout 60 "$tool" "${common[@]}" "$ADDR_A" > "$work/client.out" 2>&1 || rc=$?
srv=0
wait "$server" || srv=$?
cat "$work/client.out"
[ $rc -eq 0 ] && [ $srv -eq 0 ] || { echo "--- server"; cat "$work/server.out"; echo "FAIL: client $rc, server $srv"; exit 1; }
# The result row follows the "#bytes" header: size, iterations, then figures.
row=$(awk '/#bytes/ {getline; print; exit}' "$work/client.out")
[ -n "$row" ] || { echo "FAIL: no result row"; exit 1; }
echo "$row" | awk '{ for (i = 3; i <= NF; ++i) if ($i + 0 > 0) found = 1 } END { exit found ? 0 : 1 }' ||
  { echo "FAIL: every figure is zero: $row"; exit 1; }
echo PASS
