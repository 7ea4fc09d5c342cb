#!/usr/bin/env bash
# UCX, unmodified (Debian's ucx-utils): ucx_perftest through our
# libibverbs.so.1, with UCX limited to one verbs transport.
#   ucx.sh <dir of the softverbs executable> <host|roce> <rc|ud|cm>
# host: server and client on localhost, device softverbs0.
# roce: server and client in two network namespaces, softverbs_roce0 each.
# rc, ud: for each of tag_lat 8 B, tag_bw 1 MiB and ucp_put_bw 1 MiB both
# ends exit 0 and the client's "Final:" row has non-zero latencies and rates.
# cm: UCP's client/server API (io_demo, 200 reads and writes of 1-64 KiB with
# data and transaction checks) connects through UCX's rdmacm connection
# manager, i.e. our librdmacm.so.1; the client must say it used it. UCX lists a device only
# when /dev/infiniband/<dev_name> exists: the programs run under
# `softverbs run --dev-nodes`, which provides it without touching /dev.
# `rc` needs `ud_verbs` beside it: UCX wires an RC endpoint up through an
# auxiliary transport, as with any verbs device.
set -euo pipefail
bin=$1
fabric=$2
transport=$3
here=$(cd "$(dirname "$0")" && pwd)
command -v ucx_perftest >/dev/null || { echo "SKIP: ucx_perftest is not installed (Debian package ucx-utils)"; exit 77; }
case $transport in
  rc) tls=rc_verbs,ud_verbs ;;
  ud) tls=ud_verbs ;;
  cm) tls=rc_verbs,ud_verbs,self ;;
  *) echo "usage: ucx.sh BIN host|roce rc|ud|cm" >&2; exit 2 ;;
esac
# The nodes come from `softverbs run --dev-nodes` (a mount namespace): skip
# where this machine allows none and has no nodes either.
"$bin/softverbs" run --dev-nodes -- true 2>/dev/null ||
  { echo "SKIP: softverbs run --dev-nodes is not permitted here (no mount namespaces)"; exit 77; }
work=$(mktemp -d)
seg=/dev/shm/softverbs-conf-ucx-$fabric-$transport-$$
pids=()
cleanup() {
  local p
  # Each PID is a `timeout`, whose program is its child: TERM reaches the
  # program through it (a KILL of `timeout` alone would orphan the program).
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.2
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ "$fabric" != roce ] || netns_down
  rm -rf "$work" "$seg" "$seg".* "$seg-a" "$seg-a".* "$seg-b" "$seg-b".*
}
trap cleanup EXIT

run_in=()
if [ "$fabric" = roce ]; then
  . "$here/../roce/netns.sh"
  netns_up
  trap cleanup EXIT
  server_env=(SOFTVERBS_ROCE_ADDR="$ADDR_A" SOFTVERBS_DEVICE_PATH="$seg-a" UCX_NET_DEVICES=softverbs_roce0:1)
  client_env=(SOFTVERBS_ROCE_ADDR="$ADDR_B" SOFTVERBS_DEVICE_PATH="$seg-b" UCX_NET_DEVICES=softverbs_roce0:1)
  server_ns=(ip netns exec "$NETNS_A")
  client_ns=(ip netns exec "$NETNS_B")
  server_addr=$ADDR_A
else
  server_env=(SOFTVERBS_DEVICE_PATH="$seg" UCX_NET_DEVICES=softverbs0:1)
  client_env=("${server_env[@]}")
  server_ns=()
  client_ns=()
  server_addr=localhost
fi
common_env=(UCX_TLS="$tls" UCX_WARN_UNUSED_ENV_VARS=n)
. "$(dirname "$0")/ports.sh"
port=$(free_tcp_port 8000)

one() {
  local test=$1 size=$2 iters=$3 rc=0 srv=0 _
  "${server_ns[@]}" env "${common_env[@]}" "${server_env[@]}" timeout 60 \
    "$bin/softverbs" run --dev-nodes -- ucx_perftest -p "$port" >"$work/server.out" 2>&1 &
  local server=$!
  pids+=("$server")
  # ucx_perftest's client gives up on a refused connect: retry while the server starts.
  for _ in $(seq 100); do
    rc=0
    "${client_ns[@]}" env "${common_env[@]}" "${client_env[@]}" timeout 60 \
      "$bin/softverbs" run --dev-nodes -- ucx_perftest "$server_addr" -p "$port" -t "$test" -s "$size" \
      -n "$iters" >"$work/client.out" 2>&1 || rc=$?
    if [ $rc -ne 0 ] && grep -qE "Connection refused|connect\(\) failed" "$work/client.out" &&
       kill -0 "$server" 2>/dev/null; then
      sleep 0.1
    else
      break
    fi
  done
  wait "$server" || srv=$?
  if [ $rc -ne 0 ] || [ $srv -ne 0 ]; then
    echo "--- client"; cat "$work/client.out"; echo "--- server"; cat "$work/server.out"
    echo "FAIL: $fabric $tls $test $size: client exited $rc, server $srv"
    exit 1
  fi
  local final
  final=$(grep '^Final:' "$work/client.out" || true)
  [ -n "$final" ] || { cat "$work/client.out"; echo "FAIL: $fabric $tls $test: no Final row"; exit 1; }
  # iterations, latency p50 / average / overall, bandwidth average / overall
  # (0.00 MB/s for 8 B messages), message rate average / overall.
  awk '{ if (NF != 9 || $2 + 0 <= 0) exit 1; for (i = 3; i <= 9; ++i) if (i != 6 && i != 7 && $i + 0 <= 0) exit 1 }' <<<"$final" ||
    { echo "$final"; echo "FAIL: $fabric $tls $test: a zero figure"; exit 1; }
  echo "PASS: $fabric $tls $test $size B: $final"
  port=$((port + 1))
}

# io_demo's server serves until it is killed; its client exits 0 once every
# IO was checked and its connection closed.
through_cm() {
  local rc=0 _
  "${server_ns[@]}" env "${common_env[@]}" "${server_env[@]}" timeout 60 \
    "$bin/softverbs" run --dev-nodes -- io_demo -p "$port" -q -o read,write -d 1024:65536 -i 200 >"$work/server.out" 2>&1 &
  local server=$!
  pids+=("$server")
  for _ in $(seq 100); do
    rc=0
    "${client_ns[@]}" env "${common_env[@]}" "${client_env[@]}" UCX_LOG_LEVEL=debug timeout 60 \
      "$bin/softverbs" run --dev-nodes -- io_demo -p "$port" -q -o read,write -d 1024:65536 -i 200 "$server_addr" \
      >"$work/client.out" 2>&1 || rc=$?
    if [ $rc -ne 0 ] && grep -qE "Connection refused|rejected|unreachable" "$work/client.out" &&
       kill -0 "$server" 2>/dev/null; then
      sleep 0.2
    else
      break
    fi
  done
  kill -0 "$server" 2>/dev/null || { cat "$work/server.out"; echo "FAIL: $fabric io_demo server exited early"; exit 1; }
  if [ $rc -ne 0 ] || ! grep -q "Client exit with status 'OK'" "$work/client.out"; then
    grep -v " DEBUG \| TRACE " "$work/client.out" | tail -n 30; echo "--- server"; tail -n 30 "$work/server.out"
    echo "FAIL: $fabric io_demo client exited $rc"
    exit 1
  fi
  kill -TERM "$server"  # through its `timeout`, which passes it on
  wait "$server" 2>/dev/null || true
  grep -q "on cm rdmacm" "$work/client.out" ||
    { grep "wireup_cm" "$work/client.out" | head; echo "FAIL: $fabric io_demo did not connect through the rdmacm CM"; exit 1; }
  echo "PASS: $fabric io_demo: 200 checked IOs over a UCP endpoint that UCX's rdmacm CM connected"
}

if [ "$transport" = cm ]; then
  [ "$server_addr" != localhost ] || server_addr=127.0.0.1  # io_demo takes numeric addresses only
  command -v io_demo >/dev/null || { echo "SKIP: io_demo is not installed (Debian package ucx-utils)"; exit 77; }
  through_cm
  exit 0
fi
one tag_lat 8 2000
one tag_bw 1048576 200
one ucp_put_bw 1048576 200
