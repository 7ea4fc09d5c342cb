#!/usr/bin/env bash
# rc_stress (every RC operation, each verified) between two network namespaces
# over our RoCE device, optionally through a misbehaving network.
#   rc_stress.sh <dir of libibverbs.so.1> <rc_stress binary> clean|faults|dead-peer
set -euo pipefail
lib=$1
bin=$2
scenario=$3
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns.sh"
netns_up
work=$(mktemp -d)
cleanup() { netns_down; rm -rf "$work"; rm -rf /dev/shm/softverbs-itest-st-$$-*; }
trap cleanup EXIT

port=$(( 21000 + $$ % 20000 ))
faults=
args=(--ops 10000)
case $scenario in
  # A local ACK timeout of 67 ms (8 tries: about half a second): a clean
  # network loses nothing, so only a peer the loaded machine left off the
  # CPU for 134 ms (timeout 12) could end it in RETRY_EXC_ERR.
  clean) args+=(--timeout 14) ;;
  # 1 % loss, 1 % duplication, 2 % reordered within 8 datagrams, 0.1 % corrupted,
  # on both directions (requests and responses); the seed makes a failure replayable.
  faults) faults="loss=0.01,dup=0.01,reorder=0.02:8,corrupt=0.001,seed=${SOFTVERBS_TEST_SEED:-7}" ;;
  dead-peer) args=(--dead-peer --timeout 14) ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac
env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_A" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-st-$$-a
       SOFTVERBS_FAULTS="$faults")
env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_B" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-st-$$-b
       SOFTVERBS_FAULTS="$faults")

in_a env "${env_a[@]}" timeout 150 "$bin" --server --port "$port" > "$work/server.out" 2>&1 &
NETNS_PIDS+=("$!")
server=$!
rc=0
in_b env "${env_b[@]}" timeout 150 "$bin" --connect "$ADDR_A" --port "$port" "${args[@]}" > "$work/client.out" 2>&1 || rc=$?
srv=0
wait "$server" || srv=$?
cat "$work/client.out" "$work/server.out"
[ $rc -eq 0 ] && [ $srv -eq 0 ] || { echo "FAIL: client $rc, server $srv (faults: ${faults:-none})"; exit 1; }
if [ "$scenario" = faults ]; then
  # The faults happened: datagrams dropped and corrupted on the way, and the
  # receiver saw the corrupted ones fail their ICRC.
  status=$lib/../bin/softverbs
  counters() { env SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-st-$$-$1 "$status" status --json |
               python3 -c 'import json,sys; print(" ".join(f"{k}={v}" for k,v in json.load(sys.stdin)["counters"].items() if v))'; }
  a=$(counters a); b=$(counters b)
  echo "side A: $a"; echo "side B: $b"
  for want in faults_dropped faults_duplicated faults_reordered faults_corrupted icrc_errors; do
    [[ " $a $b " == *" $want="* ]] || { echo "FAIL: no $want counted"; exit 1; }
  done
fi
echo PASS
