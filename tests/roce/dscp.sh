#!/usr/bin/env bash
# Issue 20: the path's GRH traffic class reaches the IP header's DSCP/ECN
# byte of every RoCEv2 datagram, as rxe and RoCE NICs put it there, in both
# directions (requests carry the requester's, acknowledgements the
# responder's QP's), on IPv4 (TOS) and IPv6 (traffic class), and the ICRC,
# which masks that byte, still checks (icrc_check.py, independent of src/wire).
# Debian's ib_write_bw with --tclass between two network namespaces, captured
# with dumpcap on namespace A's veth.
#   dscp.sh <dir of libibverbs.so.1>
set -euo pipefail
lib=$1
here=$(cd "$(dirname "$0")" && pwd)
for tool in dumpcap tshark ib_write_bw; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool is not installed (scripts/deps.sh)"; exit 77; }
done
python=/usr/bin/python3
"$python" -c 'import scapy.contrib.roce' 2> /dev/null ||
  { echo "SKIP: $python cannot import scapy (python3-scapy, scripts/deps.sh)"; exit 77; }
. "$here/netns.sh"
netns_up
work=$(mktemp -d)
cleanup() { netns_down; rm -rf "$work"; rm -rf /dev/shm/softverbs-itest-dscp-$$-*; }
trap cleanup EXIT
port=$(( 23000 + $$ % 20000 ))
fail() { echo "FAIL: $*"; exit 1; }

# run NAME TCLASS SERVER_ADDR CLIENT_ADDR: one ib_write_bw run, captured in
# $work/NAME.pcap. The rendezvous is TCP over IPv4 (perftest's takes no IPv6
# address) whatever the devices' GIDs.
run() {
  local name=$1 tclass=$2 addr_a=$3 addr_b=$4 pcap="$work/$1.pcap"
  port=$(( port + 1 ))
  ip netns exec "$NETNS_A" timeout 60 dumpcap -i "va-$$" -f "udp port 4791" -P -w "$pcap" > "$work/$name.dumpcap" 2>&1 &
  local cap=$!
  NETNS_PIDS+=("$cap")
  for _ in $(seq 100); do
    grep -qs "^Capturing on" "$work/$name.dumpcap" && break
    kill -0 "$cap" 2> /dev/null || break
    sleep 0.05
  done
  grep -q "^Capturing on" "$work/$name.dumpcap" || { cat "$work/$name.dumpcap"; fail "dumpcap did not start"; }
  local args=(-d softverbs_roce0 -x 0 -n 50 -s 4096 --tclass "$tclass" -p "$port")
  in_a env LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$addr_a" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-dscp-$$-a \
    timeout 60 ib_write_bw "${args[@]}" > "$work/$name.server" 2>&1 &
  local server=$!
  NETNS_PIDS+=("$server")
  wait_listen in_a "$port" "$server" || true
  local rc=0 srv=0
  in_b env LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$addr_b" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-dscp-$$-b \
    timeout 60 ib_write_bw "${args[@]}" "$ADDR_A" > "$work/$name.client" 2>&1 || rc=$?
  wait "$server" || srv=$?
  sleep 0.5  # dumpcap hands over what the kernel retired (250 ms blocks)
  kill -INT "$cap" 2> /dev/null || true
  wait "$cap" || true
  [ $rc -eq 0 ] && [ $srv -eq 0 ] || { cat "$work/$name.server" "$work/$name.client"; fail "$name: client $rc, server $srv"; }
  rm -rf /dev/shm/softverbs-itest-dscp-$$-*
}

# check NAME IP TCLASS CLIENT_ADDR: every datagram, each way, carries TCLASS
# in the IP (ip or ipv6) header's DSCP/ECN byte.
check() {
  local name=$1 ip=$2 want=$3 client=$4 field
  [ "$ip" = ip ] && field=ip.dsfield || field=ipv6.tclass
  timeout 60 tshark -n -r "$work/$name.pcap" -Y "udp.port == 4791" -T fields -e "$ip.src" -e "$field" \
    > "$work/$name.fields" 2> "$work/$name.tshark" || { cat "$work/$name.tshark"; fail "tshark"; }
  # Requests come from the client (B), acknowledgements from the server (A).
  read -r total requests acks bad < <("$python" - "$want" "$client" "$work/$name.fields" <<'PY'
import ipaddress, sys
want, client, total, req, ack, bad = int(sys.argv[1]), ipaddress.ip_address(sys.argv[2]), 0, 0, 0, 0
for line in open(sys.argv[3]):
    src, value = line.split()
    total += 1
    req += ipaddress.ip_address(src) == client
    ack += ipaddress.ip_address(src) != client
    bad += int(value, 0) != want
print(total, req, ack, bad)
PY
)
  echo "$name: $total datagrams ($requests requests, $acks acknowledgements), $bad without traffic class $want"
  [ "$requests" -ge 50 ] && [ "$acks" -ge 1 ] || fail "$name: too few datagrams captured"
  [ "$bad" -eq 0 ] || { sort "$work/$name.fields" | uniq -c | head >&2; fail "$name: a datagram without its traffic class"; }
  "$python" "$here/icrc_check.py" "$work/$name.pcap" || fail "$name: ICRC"
}

run v4 104 "$ADDR_A" "$ADDR_B"      # DSCP 26 (AF31), not ECN-capable
check v4 ip 104 "$ADDR_B"
run v6 186 "$ADDR6_A" "$ADDR6_B"    # DSCP 46 (EF), ECT(0)
check v6 ipv6 186 "$ADDR6_B"
echo PASS
