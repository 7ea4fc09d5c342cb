#!/usr/bin/env bash
# Issue 20: per-SL counts of RoCE traffic. Debian's ib_write_bw on SL 3
# between two network namespaces; then Debian's perfquery reads each
# device's PMA (LID 0: a RoCE port's own agents): the requester's
# PortXmitDataSL and the responder's PortRcvDataSL have the data under SL 3,
# as much as PortXmitData / PortRcvData count for the requests, and no
# other SL has any; the responder's PortVLOpPackets/PortVLOpData have them
# on VL 3 (the boot SL2VL table: SL n on VL n mod 8) and on no other VL.
# Then the OpCode selector (PMA Sets by softverbs_pma_select, as perfquery
# sends OpCode 0 only): a second run counts its RDMA WRITE FIRST packets in
# PortOpRcvCounters and its LAST packets in PortVLOpPackets, one of each per
# message, and no SEND ONLY in PortVLOpData.
#   qos_sl.sh <dir of libibverbs.so.1 and libibumad.so.3> <softverbs_pma_select>
set -euo pipefail
lib=$1
select_tool=$2
here=$(cd "$(dirname "$0")" && pwd)
for tool in ib_write_bw perfquery; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
. "$here/netns.sh"
netns_up
work=$(mktemp -d)
cleanup() { netns_down; rm -rf "$work"; rm -rf /dev/shm/softverbs-itest-qsl-$$-*; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
port=$(( 24000 + $$ % 20000 ))
env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_A" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-qsl-$$-a)
env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_B" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-qsl-$$-b)
# write_run PORT NAME: 300 x 64 KiB ib_write_bw on SL 3, server in ns A.
write_run() {
  local args=(-d softverbs_roce0 -x 0 -n 300 -s 65536 --sl 3 -p "$1") rc=0 srv=0 server
  in_a env "${env_a[@]}" timeout 60 ib_write_bw "${args[@]}" > "$work/$2.server" 2>&1 &
  NETNS_PIDS+=("$!")
  server=$!
  wait_listen in_a "$1" "$server" || true
  in_b env "${env_b[@]}" timeout 60 ib_write_bw "${args[@]}" "$ADDR_A" > "$work/$2.client" 2>&1 || rc=$?
  wait "$server" || srv=$?
  [ $rc -eq 0 ] && [ $srv -eq 0 ] || { cat "$work/$2.server" "$work/$2.client"; fail "ib_write_bw $2: client $rc, server $srv"; }
}
write_run "$port" first

# field FILE NAME: the value of perfquery's "Name:.....value" line.
. "$(dirname "$0")/../conformance/diag_output.sh"
# The counts outlive the processes that made them (their share goes to the segment).
in_b env "${env_b[@]}" timeout 20 perfquery -X > "$work/b.xmtsl" 2>&1 || { cat "$work/b.xmtsl"; fail "perfquery -X"; }
in_b env "${env_b[@]}" timeout 20 perfquery -x > "$work/b.ext" 2>&1 || { cat "$work/b.ext"; fail "perfquery -x"; }
in_a env "${env_a[@]}" timeout 20 perfquery -S > "$work/a.rcvsl" 2>&1 || { cat "$work/a.rcvsl"; fail "perfquery -S"; }
in_a env "${env_a[@]}" timeout 20 perfquery -x > "$work/a.ext" 2>&1 || { cat "$work/a.ext"; fail "perfquery -x"; }
in_a env "${env_a[@]}" timeout 20 perfquery --vloppackets > "$work/a.vlpkts" 2>&1 ||
  { cat "$work/a.vlpkts"; fail "perfquery --vloppackets"; }
in_a env "${env_a[@]}" timeout 20 perfquery --vlopdata > "$work/a.vldata" 2>&1 ||
  { cat "$work/a.vldata"; fail "perfquery --vlopdata"; }
x3=$(field "$work/b.xmtsl" XmtDataSL3) xmit=$(field "$work/b.ext" PortXmitData)
r3=$(field "$work/a.rcvsl" RcvDataSL3) rcv=$(field "$work/a.ext" PortRcvData)
echo "requester: XmtDataSL3 $x3 of PortXmitData $xmit; responder: RcvDataSL3 $r3 of PortRcvData $rcv (4-octet words)"
# 300 x 64 KiB of payload is 4.9M words; the requester sends nothing but
# requests, the responder receives nothing but requests.
[ "$x3" -ge 4915200 ] || fail "SL 3 sent $x3 words, less than the data"
[ "$x3" = "$xmit" ] || fail "SL 3 sent $x3 words, the port $xmit"
[ "$r3" -ge 4915200 ] || fail "SL 3 received $r3 words, less than the data"
[ "$r3" = "$rcv" ] || fail "SL 3 received $r3 words, the port $rcv"
for sl in 0 1 2 4 5 6 7 8 9 10 11 12 13 14 15; do
  [ "$(field "$work/b.xmtsl" XmtDataSL$sl)" = 0 ] || fail "SL $sl sent data"
  [ "$(field "$work/a.rcvsl" RcvDataSL$sl)" = 0 ] || fail "SL $sl received data"
  [ "$(field "$work/a.vlpkts" PortVLOpPackets$sl)" = 0 ] || fail "VL $sl received packets"
  [ "$(field "$work/a.vldata" PortVLOpData$sl)" = 0 ] || fail "VL $sl received data"
done
v3=$(field "$work/a.vldata" PortVLOpData3) p3=$(field "$work/a.vlpkts" PortVLOpPackets3)
rcv_pkts=$(field "$work/a.ext" PortRcvPkts)
echo "responder: VL 3 received $p3 packets (PortRcvPkts $rcv_pkts), $v3 words"
[ "$v3" = "$r3" ] || fail "VL 3 received $v3 words, SL 3 $r3"
# PortVLOpPackets is 16 bits: it stops at 65535.
[ "$p3" = "$(( rcv_pkts < 65535 ? rcv_pkts : 65535 ))" ] || fail "VL 3 received $p3 packets, the port $rcv_pkts"

# The responder's selectors: RC RDMA WRITE FIRST (0x06), LAST (0x08), SEND ONLY (0x04).
for sel in "oprcv 0x06" "vloppackets 0x08" "vlopdata 0x04"; do
  # shellcheck disable=SC2086 # two words
  in_a env "${env_a[@]}" timeout 20 "$select_tool" $sel > "$work/select.out" 2>&1 ||
    { cat "$work/select.out"; fail "softverbs_pma_select $sel"; }
done
write_run "$(( port + 1 ))" second
for q in oprcvcounters vloppackets vlopdata; do
  in_a env "${env_a[@]}" timeout 20 perfquery --$q > "$work/a.$q" 2>&1 || { cat "$work/a.$q"; fail "perfquery --$q"; }
done
first=$(field "$work/a.oprcvcounters" PortOpRcvPkts) last=$(field "$work/a.vloppackets" PortVLOpPackets3)
echo "responder, second run: $first RDMA WRITE FIRST, $last RDMA WRITE LAST on VL 3 (300 messages)"
# One of each per message, and a retransmitted one counts again as it would
# on the wire (a tail-loss probe resends a message's last packet).
[ "$first" -ge 300 ] && [ "$first" -le 330 ] ||
  { cat "$work/a.oprcvcounters"; fail "PortOpRcvPkts (WRITE FIRST) is $first"; }
[ "$last" -ge 300 ] && [ "$last" -le 330 ] || { cat "$work/a.vloppackets"; fail "PortVLOpPackets3 (WRITE LAST) is $last"; }
[ "$(field "$work/a.vlopdata" PortVLOpData3)" = 0 ] || { cat "$work/a.vlopdata"; fail "SEND ONLY counted"; }
echo "PASS: roce qos_sl"
