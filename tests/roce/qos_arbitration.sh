#!/usr/bin/env bash
# Issue 20: VL arbitration on a paced RoCE link, configured without an SM.
# Namespace A's device is a paced 1X SDR port (2 Gb/s of data) whose QoS
# tables come from a file of opensm options (SOFTVERBS_QOS_CONFIG). Two
# Debian ib_write_bw flows run at once from A to B, one on SL0 and one on SL2
# (VL0 and VL2 by the file's SL2VL). Their shares are read from A's own PMA
# (perfquery -X at LID 0: PortXmitDataSL) over a window in the middle of the
# run, so a slow start of one flow on the shared cores does not count.
#   qos_arbitration.sh <dir of libibverbs.so.1 and libibumad.so.3> <scenario>
# Scenarios:
#   weights  low-priority list VL0:1, VL2:3: VL0 gets 25 %, VL2 75 %
#   high     low list VL0:3, VL2 in the high list, VLHighLimit 0: one high
#            packet, then one low packet: 50 % each (the low list alone: 75/25)
#   config   a file the port cannot take is refused with its reason (no
#            device), and a second process whose file differs from the
#            port's tables is told so
#   read     one ib_read_bw from A: the READ responses' data takes A's paced
#            lane (A's port stands in for B's), so it measures the link's rate
# Every tool runs under `timeout`; background processes are killed by PID.
set -euo pipefail
lib=$1
scenario=$2
here=$(cd "$(dirname "$0")" && pwd)
for tool in ib_write_bw perfquery ibv_devinfo; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
. "$here/netns.sh"
netns_up
work=$(mktemp -d)
cleanup() { netns_down; rm -rf "$work"; rm -rf /dev/shm/softverbs-itest-qarb-$$-*; }
trap cleanup EXIT
fail() { echo "FAIL: roce qos $scenario: $*" >&2; exit 1; }

# tables NAME LOW HIGH: an opensm options file with SL n -> VL n mod 8.
tables() {
  cat > "$work/$1.conf" <<CONF
# opensm's own syntax; the rest of an opensm.conf would be skipped
qos TRUE
qos_ca_max_vls 8
qos_ca_high_limit 0
qos_ca_vlarb_high $3
qos_ca_vlarb_low $2
qos_ca_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7
CONF
}
env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_A" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-qarb-$$-a
       SOFTVERBS_LINK=1xSDR SOFTVERBS_LINK_PACING=1 SOFTVERBS_QOS_CONFIG="$work/a.conf")
env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_B" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-qarb-$$-b)
port=$(( 24000 + $$ % 20000 ))

# flow SL SECONDS: an ib_write_bw pair on SL from A to B, in the background;
# the server (B) must be listening before the client (A) starts.
flow() {
  local p=$(( port + $1 )) server
  in_b env "${env_b[@]}" timeout $(( $2 + 30 )) ib_write_bw -d softverbs_roce0 -x 0 -s 65536 --sl "$1" -D "$2" -p "$p" \
    > "$work/server$1.out" 2>&1 &
  server=$!
  NETNS_PIDS+=("$server")
  wait_listen in_b "$p" "$server" || { cat "$work/server$1.out" >&2; fail "server on SL$1 did not listen"; }
  in_a env "${env_a[@]}" timeout $(( $2 + 30 )) ib_write_bw -d softverbs_roce0 -x 0 -s 65536 --sl "$1" -D "$2" -p "$p" \
    "$ADDR_B" > "$work/client$1.out" 2>&1 &
  NETNS_PIDS+=("$!")
}

# field FILE NAME: the value of perfquery's "Name:.....value" line.
. "$here/../conformance/diag_output.sh"

# sl_words NAME: A's PortXmitDataSL of SL0 and SL2 now, as "a b".
sl_words() {
  in_a env "${env_a[@]}" timeout 20 perfquery -X > "$work/$1" 2>&1 || { cat "$work/$1" >&2; fail "perfquery -X"; }
  echo "$(field "$work/$1" XmtDataSL0) $(field "$work/$1" XmtDataSL2)"
}

# 1X SDR carries 2 Gb/s of data.
LINK_GBPS=2.0
. "$here/../conformance/qos_window.sh"

finish() {
  local p
  for p in "${NETNS_PIDS[@]}"; do wait "$p" || { cat "$work"/*.out >&2; fail "an ib_write_bw exited $?"; }; done
  NETNS_PIDS=()
  # Each flow's perftest report: SL0's average a third of SL2's (weights)
  # or the same (high), as the PMA saw it.
  for sl in 0 2; do echo "SL$sl ib_write_bw: $(awk '/^ *65536 /{ print $4 " MB/s" }' "$work/client$sl.out")"; done
}

case $scenario in
  weights)
    tables a "0:1,2:3" "0:0"
    flow 0 9
    flow 2 9
    sleep 3
    window weights 4 0.25
    finish
    ;;
  high)
    tables a "0:3" "2:1"
    flow 0 9
    flow 2 9
    sleep 3
    window high 4 0.5
    finish
    ;;
  config)
    # VL9 is not operational (VL0-7): refused, with the line and the reason.
    tables a "0:1,9:3" "0:0"
    in_a env "${env_a[@]}" timeout 20 ibv_devinfo -d softverbs_roce0 > "$work/bad.out" 2>&1 || true
    grep -q "SOFTVERBS_QOS_CONFIG $work/a.conf: qos_ca_vlarb_low: VL9 has a weight but is not operational" \
      "$work/bad.out" || { cat "$work/bad.out" >&2; fail "a VL that is not operational was not refused"; }
    printf 'qos TRUE\nqos_ca_max_vls 16\n' > "$work/a.conf"
    in_a env "${env_a[@]}" timeout 20 ibv_devinfo -d softverbs_roce0 > "$work/bad.out" 2>&1 || true
    grep -q "a.conf: line 2: qos_ca_max_vls is 1 to 15" "$work/bad.out" || { cat "$work/bad.out" >&2; fail "max_vls 16"; }
    # The first process gives the port its tables; a later one with other
    # tables is told that its file is ignored, one with the same is not.
    tables a "0:1,2:3" "0:0"
    in_a env "${env_a[@]}" timeout 20 ibv_devinfo -d softverbs_roce0 > "$work/first.out" 2>&1 || fail "ibv_devinfo"
    grep -q "SOFTVERBS_QOS_CONFIG ignored" "$work/first.out" && fail "the first process was told its file is ignored"
    in_a env "${env_a[@]}" timeout 20 ibv_devinfo -d softverbs_roce0 > "$work/same.out" 2>&1 || fail "ibv_devinfo"
    grep -q "SOFTVERBS_QOS_CONFIG ignored" "$work/same.out" && fail "the same tables were called different"
    tables a "0:3,2:1" "0:0"
    in_a env "${env_a[@]}" timeout 20 ibv_devinfo -d softverbs_roce0 > "$work/other.out" 2>&1 || fail "ibv_devinfo"
    grep -q "SOFTVERBS_QOS_CONFIG ignored" "$work/other.out" || { cat "$work/other.out" >&2; fail "other tables: not told"; }
    ;;
  read)
    command -v ib_read_bw > /dev/null || { echo "SKIP: ib_read_bw is not installed"; exit 77; }
    tables a "0:1,2:3" "0:0"
    p=$(( port + 7 ))
    in_b env "${env_b[@]}" timeout 40 ib_read_bw -d softverbs_roce0 -x 0 -s 65536 -D 3 --report_gbits -p "$p" \
      > "$work/server7.out" 2>&1 &
    server=$!
    NETNS_PIDS+=("$server")
    wait_listen in_b "$p" "$server" || { cat "$work/server7.out" >&2; fail "ib_read_bw server did not listen"; }
    in_a env "${env_a[@]}" timeout 40 ib_read_bw -d softverbs_roce0 -x 0 -s 65536 -D 3 --report_gbits -p "$p" \
      "$ADDR_B" > "$work/client7.out" 2>&1 || { cat "$work/client7.out" >&2; fail "ib_read_bw"; }
    wait "$server" || { cat "$work/server7.out" >&2; fail "ib_read_bw server"; }
    NETNS_PIDS=()
    gbps=$(awk '$1 == 65536 { print $4 }' "$work/client7.out")
    echo "1X SDR, paced, RoCE: ib_read_bw $gbps Gb/s (the link: 2 Gb/s of data)"
    # Within 10 % of the link's rate less its headers (1-3 % at 64 KiB).
    python3 -c "import sys; v = float(sys.argv[1]); sys.exit(0 if abs(v - 1.97) <= 0.2 else 1)" "$gbps" ||
      fail "ib_read_bw: $gbps Gb/s"
    ;;
  *) fail "unknown scenario" ;;
esac
echo "PASS: roce qos $scenario"
