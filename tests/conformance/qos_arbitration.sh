#!/usr/bin/env bash
# Issue 20: VL arbitration on a paced link. The device is a 4X SDR port
# (8 Gb/s of data) with pacing on; two Debian ib_write_bw pairs share it, one
# on SL0 and one on SL2 (VL0 and VL2 by the SL2VL table opensm programs).
# Their shares are read from the port's own PMA (perfquery -X:
# PortXmitDataSL) over a window in the middle of the run, so a slow start of
# one pair on the shared cores does not count.
#   qos_arbitration.sh <dir of libibverbs.so.1 and libibumad.so.3> <scenario>
# Scenarios:
#   weights  low-priority list VL0:1, VL2:3: VL0 gets 25 %, VL2 75 %
#   high     low list VL0:3, VL2 in the high list, VLHighLimit 0: one high
#            packet, then one low packet: 50 % each (all low: 75/25)
#   swap     starts as `weights`; a second opensm run swaps the weights
#            (VL0:3, VL2:1) mid-run, and the shares follow (75/25)
# Every tool runs under `timeout`; background processes are killed by PID.
. "$(dirname "$0")/ports.sh"
set -euo pipefail
lib=$1
scenario=$2
. "$(dirname "$0")/paced_link.sh" "qos-$scenario"
fail() { echo "FAIL: qos $scenario: $*" >&2; exit 1; }
for tool in ib_write_bw perfquery opensm; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done

run_timeout=60
. "$(dirname "$0")/diag_output.sh"

# opensm NAME LOW HIGH: one sweep that programs SL n -> VL n mod 8 and the lists.
opensm_tables() {
  cat >"$work/$1.conf" <<CONF
dump_files_dir $work
qos TRUE
qos_ca_max_vls 8
qos_ca_high_limit 0
qos_ca_vlarb_high $3
qos_ca_vlarb_low $2
qos_ca_sl2vl 0,1,2,3,4,5,6,7,0,1,2,3,4,5,6,7
CONF
  OSM_CACHE_DIR=$work run "$1.out" opensm -o -F "$work/$1.conf" -f "$work/$1.log"
  grep -q "SUBNET UP" "$work/$1.log" || { tail -30 "$work/$1.log" >&2; fail "opensm: no SUBNET UP"; }
}

# flow SL SECONDS: an ib_write_bw pair on SL, in the background.
flow() { pair "flow$1" "$1" ib_write_bw --sl "$1" -D "$2"; }

# sl_words NAME: PortXmitDataSL of SL0 and SL2 now, as "a b".
sl_words() {
  run "$1" perfquery -X
  echo "$(field "$work/$1" XmtDataSL0) $(field "$work/$1" XmtDataSL2)"
}

# 4X SDR carries 8 Gb/s of data.
LINK_GBPS=8.0
. "$(dirname "$0")/qos_window.sh"

run devinfo ibv_devinfo -v -d softverbs0
grep -q "active_speed:.*2.5 Gbps" "$work/devinfo" || { cat "$work/devinfo" >&2; fail "not an SDR port"; }
case $scenario in
  weights)
    opensm_tables osm "0:1,2:3" "0:0"
    flow 0 8
    flow 2 8
    sleep 3
    window weights 3 0.25
    ;;
  high)
    opensm_tables osm "0:3" "2:1"
    flow 0 8
    flow 2 8
    sleep 3
    window high 3 0.5
    ;;
  swap)
    opensm_tables osm "0:1,2:3" "0:0"
    flow 0 14
    flow 2 14
    sleep 3
    window before 3 0.25
    opensm_tables osm2 "0:3,2:1" "0:0"
    # smpquery shows the table the shares now follow (low list first).
    run vlarb smpquery vlarb 1
    awk '/^VL /||/^WEIGHT/' "$work/vlarb" | head -2 >"$work/vlarb.low"
    printf '%s\n' 'VL    : |0x0 |0x2 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |' \
      'WEIGHT: |0x3 |0x1 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |' >"$work/vlarb.want"
    diff "$work/vlarb.want" "$work/vlarb.low" >&2 || fail "smpquery vlarb: not the swapped table"
    sleep 0.5
    window after 3 0.75
    ;;
  *) fail "unknown scenario" ;;
esac
for p in "${pids[@]}"; do wait "$p" || fail "an ib_write_bw exited $?"; done
pids=()
# Both ends are this device: what each SL received is what it sent, and the
# counts outlive the QPs and processes that made them.
run xmit perfquery -X
run rcv perfquery -S
for sl in 0 2; do
  x=$(field "$work/xmit" XmtDataSL$sl) r=$(field "$work/rcv" RcvDataSL$sl)
  echo "SL$sl: XmtDataSL $x, RcvDataSL $r"
  [ "$x" -gt 0 ] && [ "$x" = "$r" ] || fail "SL$sl sent $x words and received $r"
done
[ "$(field "$work/xmit" XmtDataSL1)" = 0 ] || fail "SL1 sent nothing, yet counts"

echo "PASS: qos $scenario"
