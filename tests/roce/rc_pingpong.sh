#!/usr/bin/env bash
# Debian's ibv_rc_pingpong (and ibv_uc_pingpong, ibv_ud_pingpong), unmodified,
# between two network namespaces over our RoCE device (RoCEv2 on UDP): one end
# per namespace, GID index 0.
#   rc_pingpong.sh <dir of libibverbs.so.1> <scenario>
#   scenarios: v4 (IPv4 GID), v6 (IPv6 GID), big (1 MiB messages), mtu4096,
#              uc, uc-v6, ud, ud-v6, srq (ibv_srq_pingpong: 4 RC QPs on one SRQ
#              per side), srq-events, xsrq (ibv_xsrq_pingpong: XRC), xsrq-clients
#              (a server with two clients in one namespace, on one device
#              and one XRC domain: the server's messages to one client's
#              XRC_RECV QP land in the other client's SRQ on alternate sends)
set -euo pipefail
lib=$1
scenario=$2
here=$(cd "$(dirname "$0")" && pwd)
. "$here/netns.sh"
netns_up

work=$(mktemp -d)
cleanup() {
  netns_down
  if [ -n "${SHOW_STATUS:-}" ]; then
    for s in a b; do SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-roce-$$-$s "$lib/../bin/softverbs" status || true; done
  fi
  rm -rf "$work"; rm -rf /dev/shm/softverbs-itest-roce-$$-*
}
trap cleanup EXIT

addr_a=$ADDR_A addr_b=$ADDR_B
args=(-g 0 -n 200 -c)
mtu=1024
prog=ibv_rc_pingpong
clients=1
case $scenario in
  # -c: the receiver checks every byte of every message.
  uc) prog=ibv_uc_pingpong; args=(-g 0 -n 200 -s 5000 -c) ;;
  uc-v6) prog=ibv_uc_pingpong; args=(-g 0 -n 200 -c); addr_a=$ADDR6_A addr_b=$ADDR6_B ;;
  # A UD message is one MTU at most.
  ud) prog=ibv_ud_pingpong; args=(-g 0 -n 200 -s 1024 -c) ;;
  ud-v6) prog=ibv_ud_pingpong; args=(-g 0 -n 200 -s 512 -c); addr_a=$ADDR6_A addr_b=$ADDR6_B ;;
  srq) prog=ibv_srq_pingpong; args=(-g 0 -n 100 -q 4 -c) ;;
  srq-events) prog=ibv_srq_pingpong; args=(-g 0 -n 100 -q 4 -e -c) ;;
  # XRC_SEND to the peer's XRC_RECV QP and XRC SRQ (XRCETH on the wire).
  xsrq) prog=ibv_xsrq_pingpong; args=(-g 0 -n 200 -s 5000) ;;
  xsrq-clients) prog=ibv_xsrq_pingpong; args=(-g 0 -n 100 -s 5000); clients=2 ;;
  v4) ;;
  v6) addr_a=$ADDR6_A addr_b=$ADDR6_B ;;
  big) args=(-g 0 -n 20 -s 1048576 -c) ;;
  mtu4096) mtu=4096; args=(-g 0 -n 100 -s 65536 -m 4096 -c) ;;
  *) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac
port=$(( 20000 + $$ % 20000 ))

env_for() {  # address, name
  echo LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$1" SOFTVERBS_ROCE_MTU=$mtu \
       SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-roce-$$-$2
}

server_args=()
[ $clients -gt 1 ] && server_args=(-c $clients)
in_a env $(env_for "$addr_a" a) timeout 60 $prog -d softverbs_roce0 -p $port "${args[@]}" "${server_args[@]}" \
  > "$work/server.out" 2>&1 &
server=$!
NETNS_PIDS+=("$server")
# The client does not retry the TCP connect: start it once the server listens.
wait_listen in_a "$port" "$server" || true
rc=0
ends=(server)
if [ $clients -eq 1 ]; then
  ends+=(client)
  in_b env $(env_for "$addr_b" b) timeout 60 $prog -d softverbs_roce0 -p $port "${args[@]}" "$ADDR_A" \
    > "$work/client.out" 2>&1 || rc=$?
else
  # Every client on the one device of namespace B (one segment, one address).
  cpids=()
  for i in $(seq $clients); do
    ends+=(client$i)
    in_b env $(env_for "$addr_b" b) timeout 60 $prog -d softverbs_roce0 -p $port "${args[@]}" "$ADDR_A" \
      > "$work/client$i.out" 2>&1 &
    cpids+=($!)
    NETNS_PIDS+=($!)
  done
  for p in "${cpids[@]}"; do wait "$p" || rc=$?; done
fi
wait "$server" || rc=$?
for f in "${ends[@]}"; do echo "--- $f"; cat "$work/$f.out"; done
[ $rc -eq 0 ] || { echo "FAIL: exit status $rc"; exit 1; }
# Both ends report the bytes they moved and a rate (ibv_xsrq_pingpong: "success").
done_line='^[0-9]+ bytes in [0-9.]+ seconds = [0-9.]+ Mbit/sec'
[ "$prog" = ibv_xsrq_pingpong ] && done_line='^success$'
for f in "${ends[@]}"; do
  grep -Eq "$done_line" "$work/$f.out" || { echo "FAIL: no result line from the $f"; exit 1; }
done
grep -q "GID" "$work/${ends[1]}.out" || { echo "FAIL: the client did not use a GID"; exit 1; }
echo PASS
