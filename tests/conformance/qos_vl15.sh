#!/usr/bin/env bash
# Issue 20: VL15 on a paced link. Subnet management packets have a small
# buffer of their own (SOFTVERBS_VL15_BUFFER) and never wait behind data.
#   qos_vl15.sh <dir of the libraries> <softverbs_mad_flood> <scenario>
# Scenarios:
#   flood  VL15's buffer is one MAD; two threads flood the port with SMPs
#          (32 each at the start of every millisecond, together)
#          while an ib_write_bw pair runs on SL0 and ibv_rc_pingpong -c
#          checks its data on SL2: perfquery's VL15Dropped grows, and the
#          data moves at the rate it has without the flood.
#   rtt    a MAD's round trip idle, then with both data VLs saturated (two
#          ib_write_bw pairs, SL0 on VL0 and SL2 on VL2, sharing the paced
#          link): the median of `smpquery nodeinfo` runs (the whole tool)
#          and of NodeInfo round trips inside one process stays within 2x
#          of idle, or of a floor that absorbs the noise of shared cores.
#          smpquery and perfquery show the tables and the per-SL and
#          per-VL counters of that run.
# Every tool runs under `timeout`; background processes are killed by PID.
. "$(dirname "$0")/ports.sh"
set -euo pipefail
lib=$1
flood=$2
scenario=$3
. "$(dirname "$0")/paced_link.sh" "vl15-$scenario"
fail() { echo "FAIL: vl15 $scenario: $*" >&2; exit 1; }
for tool in ib_write_bw ibv_rc_pingpong perfquery smpquery; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done
[ -x "$flood" ] || fail "no $flood"

run_timeout=60
. "$(dirname "$0")/diag_output.sh"

# wait_all: every background tool exited 0.
wait_all() {
  for p in "${pids[@]}"; do wait "$p" || fail "a tool exited $? ($(tail -n 3 "$work"/*.client | tr '\n' ' '))"; done
  pids=()
}
# gbits NAME: ib_write_bw's average bandwidth (--report_gbits).
gbits() {
  awk '/#bytes/ {on = 1; next} on && NF >= 4 && $1 ~ /^[0-9]+$/ {print $4; exit}' "$work/$1.client"
}

# smpquery_ms N: the median wall time, in ms, of N `smpquery nodeinfo` runs.
smpquery_ms() {
  local i t0 t1
  for i in $(seq "$1"); do
    t0=$(date +%s%N)
    run "nodeinfo$i" smpquery nodeinfo 1
    t1=$(date +%s%N)
    echo $(( (t1 - t0) / 1000 ))
  done | sort -n | awk '{v[NR] = $1} END {printf "%.1f\n", v[int((NR + 1) / 2)] / 1000}'
}
# rtt_us N: the median in-process NodeInfo round trip of N, in us.
rtt_us() {
  timeout 60 "$flood" rtt "$1" >"$work/rtt" 2>&1 || fail "rtt: $(cat "$work/rtt")"
  awk '{print $2}' "$work/rtt"
}
# within_2x WHAT IDLE LOADED FLOOR: LOADED <= 2 x max(IDLE, FLOOR).
within_2x() {
  python3 - "$@" <<'PY' || fail "$1: the round trip grew under load"
import sys
what, idle, loaded, floor = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
print("%s: idle %.1f, both data VLs saturated %.1f (limit %.1f)" % (what, idle, loaded, 2 * max(idle, floor)))
if loaded > 2 * max(idle, floor):
    sys.exit(1)
PY
}

case $scenario in
  rtt)
    idle_tool=$(smpquery_ms 9)
    idle_rtt=$(rtt_us 2000)
    pair sl0 0 ib_write_bw --sl 0 -D 10 --report_gbits
    pair sl2 2 ib_write_bw --sl 2 -D 10 --report_gbits
    sleep 2
    run reset perfquery --vlxmitcounters -R
    run x0 perfquery -X
    t0=$(date +%s%N)
    loaded_tool=$(smpquery_ms 9)
    loaded_rtt=$(rtt_us 2000)
    run x1 perfquery -X
    run wait perfquery --vlxmitcounters
    t1=$(date +%s%N)
    run pc perfquery
    expect "$work/pc" VL15Dropped 0
    run sl2vl smpquery sl2vl 1
    run vlarb smpquery vlarb 1
    wait_all
    within_2x "smpquery nodeinfo (ms)" "$idle_tool" "$loaded_tool" 40
    within_2x "NodeInfo round trip (us)" "$idle_rtt" "$loaded_rtt" 200
    # Both VLs really were busy while the MADs were timed.
    for sl in 0 2; do
      a=$(field "$work/x0" XmtDataSL$sl) b=$(field "$work/x1" XmtDataSL$sl)
      echo "SL$sl: $(( (b - a) * 4 )) bytes sent while MADs were timed"
      [ $(( b - a )) -gt 0 ] || fail "SL$sl sent nothing while MADs were timed"
    done
    # PortVLXmitWaitCounters (ticks of 64 us): each VL waited while the
    # other's data had the link, and no other VL waited at all.
    for vl in 1 3 4 5 6 7 8 9 10 11 12 13 14 15; do
      [ "$(field "$work/wait" PortVLXmitWait$vl)" = 0 ] || { cat "$work/wait" >&2; fail "VL$vl waited"; }
    done
    python3 - $(( t1 - t0 )) "$(field "$work/wait" PortVLXmitWait0)" "$(field "$work/wait" PortVLXmitWait2)" \
      $(( $(field "$work/x1" XmtDataSL0) - $(field "$work/x0" XmtDataSL0) )) \
      $(( $(field "$work/x1" XmtDataSL2) - $(field "$work/x0" XmtDataSL2) )) <<'PY' || fail "PortVLXmitWait"
import sys
ns, w0, w2, d0, d2 = (int(v) for v in sys.argv[1:])
# What the other VL's words take alone on 8 Gb/s, in ms, against the wait.
for vl, wait, other in ((0, w0, d2), (2, w2, d0)):
    wait_ms, other_ms = wait * 0.064, other * 32 / 8e9 * 1e3
    print("VL%d waited %.0f ms of %.0f; the other VL's data took %.0f ms of the link" % (vl, wait_ms, ns / 1e6, other_ms))
    if not 0.1 * ns / 1e6 < wait_ms < 0.9 * ns / 1e6:
        sys.exit("VL%d waited %.0f ms of %.0f" % (vl, wait_ms, ns / 1e6))
PY
    # The tables the data followed: SL n -> VL n mod 8, every data VL once
    # in the low list with weight 64 (0x40).
    grep -q "| 0| 1| 2| 3| 4| 5| 6| 7| 0| 1| 2| 3| 4| 5| 6| 7|" "$work/sl2vl" ||
      { cat "$work/sl2vl" >&2; fail "smpquery sl2vl: not the boot table"; }
    awk '/^VL /||/^WEIGHT/' "$work/vlarb" | head -2 >"$work/vlarb.low"
    printf '%s\n' 'VL    : |0x0 |0x1 |0x2 |0x3 |0x4 |0x5 |0x6 |0x7 |' \
      'WEIGHT: |0x40|0x40|0x40|0x40|0x40|0x40|0x40|0x40|' >"$work/vlarb.want"
    diff "$work/vlarb.want" "$work/vlarb.low" >&2 || fail "smpquery vlarb: not the boot table"
    ;;
  flood)
    export SOFTVERBS_VL15_BUFFER=1
    pair idle 0 ib_write_bw --sl 0 -D 3 --report_gbits
    wait_all
    idle=$(gbits idle)
    run before perfquery
    before=$(field "$work/before" VL15Dropped)
    timeout 60 "$flood" flood 2 6 32 >"$work/flood" 2>&1 &
    fpid=$!
    pids+=($fpid)
    sleep 0.5
    pair loaded 0 ib_write_bw --sl 0 -D 3 --report_gbits
    pair check 2 ibv_rc_pingpong -e -l 2 -s 65536 -n 300 -c
    # Management still works while SMPs are being dropped: the PMA's GMPs
    # travel on a data VL, not through VL15's buffer.
    sleep 1.5
    run during perfquery
    during=$(field "$work/during" VL15Dropped)
    wait_all
    loaded=$(gbits loaded)
    run after perfquery
    after=$(field "$work/after" VL15Dropped)
    echo "ib_write_bw: ${idle} Gb/s alone, ${loaded} Gb/s during the flood; flood: $(cat "$work/flood")"
    echo "VL15Dropped: ${before} before, ${during} during, ${after} after"
    read -r _ sent _ answered <"$work/flood"
    [ "$answered" -lt "$sent" ] || fail "every SMP of the flood was answered"
    [ "$before" = 0 ] || fail "VL15Dropped was $before before the flood"
    [ "$during" -gt 0 ] && [ "$after" -ge "$during" ] || fail "VL15Dropped did not grow"
    # Dropped SMPs count until the 16-bit counter stops at its top.
    [ "$after" -eq 65535 ] || [ "$after" -eq $(( sent - answered )) ] ||
      fail "VL15Dropped $after, but $(( sent - answered )) SMPs went unanswered"
    grep -q "bytes in" "$work/check.client" || fail "ibv_rc_pingpong -c: $(cat "$work/check.client")"
    python3 - "$idle" "$loaded" <<'PY' || fail "the data's rate moved"
import sys
idle, loaded = float(sys.argv[1]), float(sys.argv[2])
# 4X SDR carries 8 Gb/s of data; alone the pair fills most of it, unless
# the shared cores are busy. During the flood it keeps to its rate alone,
# or runs near the link's (another load may have slowed the first run).
if idle < 8.0 * 0.3:
    sys.exit("ib_write_bw alone made only %.2f Gb/s" % idle)
if loaded < idle * 0.8 and loaded < 8.0 * 0.85:
    sys.exit("ib_write_bw made %.2f Gb/s during the flood, %.2f alone" % (loaded, idle))
PY
    ;;
  *) fail "unknown scenario" ;;
esac
echo "PASS: vl15 $scenario"
