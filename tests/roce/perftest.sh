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
cleanup() { netns_down; rm -rf "$work"; rm -rf /dev/shm/softverbs-itest-pt-$$-*; }
trap cleanup EXIT

port=$(( 21000 + $$ % 20000 ))
# 200 iterations unless the caller gives the count.
count=(-n 200)
for arg in "$@"; do [ "$arg" != -n ] || count=(); done
common=(-d softverbs_roce0 -x 0 -p "$port" "${count[@]}" "$@")
env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_A" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-pt-$$-a)
env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_B" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-pt-$$-b)

in_a env "${env_a[@]}" timeout 60 "$tool" "${common[@]}" > "$work/server.out" 2>&1 &
NETNS_PIDS+=("$!")
server=$!
# The client does not retry the TCP connect: start it once the server listens.
wait_listen in_a "$port" "$server" || true
rc=0
in_b env "${env_b[@]}" timeout 60 "$tool" "${common[@]}" "$ADDR_A" > "$work/client.out" 2>&1 || rc=$?
srv=0
wait "$server" || srv=$?
cat "$work/client.out"
[ $rc -eq 0 ] && [ $srv -eq 0 ] || { echo "--- server"; cat "$work/server.out"; echo "FAIL: client $rc, server $srv"; exit 1; }
# The result rows follow the "#bytes" header up to the closing dashes (one
# per size with -a): size, iterations, then figures, of which at least one is
# non-zero in every row.
rows=$(awk '/#bytes/ {on = 1; next} on && /^[[:space:]]*-+[[:space:]]*$/ {exit} on && NF {print}' "$work/client.out")
[ -n "$rows" ] || { echo "FAIL: no result row"; exit 1; }
awk '{ found = 0; for (i = 3; i <= NF; ++i) if ($i + 0 > 0) found = 1; if (!found) { print "zero row: " $0; bad = 1 } }
     END { exit bad }' <<<"$rows" || { echo "FAIL: a result row whose figures are all zero"; exit 1; }
echo PASS
