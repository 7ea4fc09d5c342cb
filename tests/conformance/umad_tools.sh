#!/usr/bin/env bash
# Debian's infiniband-diags, unmodified, through our libibumad.so.3 on the
# default device: the CA and port they see match ibv_devinfo, and the
# device's own SMA and PMA answer their MADs.
#   umad_tools.sh <dir of libibumad.so.3 and libibverbs.so.1> <scenario>
# Scenarios: ibstat, ibstat-roce, smpquery, ibaddr-sminfo, perfquery,
#            vlcounters (the per-VL and Op PMA attributes after a run on
#            SL3), opselect (their OpCode selector: needs a third argument,
#            softverbs_pma_select), faults, unreachable, qos (opensm -o
#            programs the QoS tables). Every tool runs under `timeout`; the only
#            background process (ib_write_bw's server) is killed by PID.
. "$(dirname "$0")/ports.sh"
set -euo pipefail
lib=$1
scenario=$2
export LD_LIBRARY_PATH=$lib
export SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-conf-umad-$scenario-$$
work=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then
    kill -TERM "$server" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  # The device and what sits beside it: sysfs tree, PMA reset point, an SM's issm FIFO and agents.
  rm -rf "$SOFTVERBS_DEVICE_PATH" "$SOFTVERBS_DEVICE_PATH".* "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $scenario: $*" >&2; exit 1; }
command -v ibstat >/dev/null || { echo "SKIP: infiniband-diags is not installed"; exit 77; }

. "$(dirname "$0")/diag_output.sh"

# The port GUID and LID ibv_devinfo shows (GID 0 ends in the port GUID).
devinfo() {
  run devinfo ibv_devinfo -v -d "$1"
  port_guid=0x$(awk '/GID\[ *0\]/ { g = $NF; gsub(/:/, "", g); print substr(g, 17); exit }' "$work/devinfo")
  node_guid=0x$(awk '$1 == "node_guid:" { g = $2; gsub(/:/, "", g); print g; exit }' "$work/devinfo")
}

# write_bw: Debian's ib_write_bw, server and client on softverbs0, $size
# bytes $iters times, with $bw_args; fails the scenario unless both ends exit 0.
size=65536 iters=200 bw_args=
write_bw() {
  local port rc
  port=$(free_tcp_port 16000)
  # shellcheck disable=SC2086 # $bw_args: several words
  timeout 60 ib_write_bw -d softverbs0 -p "$port" -s $size -n $iters $bw_args >"$work/server.out" 2>&1 &
  server=$!
  # The client does not retry its TCP connect: retry until the server listens.
  for _ in $(seq 100); do
    rc=0
    # shellcheck disable=SC2086
    timeout 60 ib_write_bw -d softverbs0 -p "$port" -s $size -n $iters $bw_args localhost >"$work/client.out" 2>&1 ||
      rc=$?
    if [ $rc -ne 0 ] && grep -q "Couldn't connect" "$work/client.out" && kill -0 "$server" 2>/dev/null; then
      sleep 0.1
    else
      break
    fi
  done
  [ $rc -eq 0 ] || { cat "$work/client.out" >&2; fail "ib_write_bw exited $rc"; }
  wait "$server" || fail "ib_write_bw server failed"
  server=
}

case $scenario in
  ibstat)
    devinfo softverbs0
    run ibstat ibstat
    grep -q "^CA 'softverbs0'" "$work/ibstat" || fail "no CA softverbs0"
    grep -q "State: Active" "$work/ibstat" || fail "port not Active"
    grep -q "Physical state: LinkUp" "$work/ibstat" || fail "port not LinkUp"
    grep -q "Link layer: InfiniBand" "$work/ibstat" || fail "link layer"
    grep -q "Base lid: 1" "$work/ibstat" || fail "LID"
    grep -q "Node GUID: $node_guid" "$work/ibstat" || fail "node GUID is not ibv_devinfo's $node_guid"
    grep -q "Port GUID: $port_guid" "$work/ibstat" || fail "port GUID is not ibv_devinfo's $port_guid"
    run ports ibstat -p
    [ "$(cat "$work/ports")" = "$port_guid" ] || fail "ibstat -p: $(cat "$work/ports")"
    run one ibstat softverbs0 1
    grep -q "State: Active" "$work/one" || fail "ibstat softverbs0 1"
    run list ibstat -l
    [ "$(cat "$work/list")" = softverbs0 ] || fail "ibstat -l: $(cat "$work/list")"
    if timeout 20 ibstat nosuchca >"$work/bad" 2>&1; then fail "ibstat of an unknown CA succeeded"; fi
    # The synthetic sysfs tree libibverbs wrote for ibv_devinfo says the same.
    sys=$SOFTVERBS_DEVICE_PATH.sysfs/class/infiniband/softverbs0/ports/1
    grep -q "Capability mask: $(cat "$sys/cap_mask")" "$work/ibstat" || fail "cap_mask is not sysfs' $(cat "$sys/cap_mask")"
    grep -q "Rate: $(awk '{ print $1 }' "$sys/rate")\$" "$work/ibstat" || fail "rate is not sysfs' $(cat "$sys/rate")"
    grep -q "SM lid: $(( $(cat "$sys/sm_lid") ))" "$work/ibstat" || fail "SM lid is not sysfs'"
    ;;
  ibstat-roce)
    export SOFTVERBS_ROCE_ADDR=127.0.0.1 SOFTVERBS_ROCE_PORT=$(( 33000 + $$ % 2000 ))
    run ibstat ibstat
    grep -q "^CA 'softverbs_roce0'" "$work/ibstat" || fail "no CA softverbs_roce0"
    grep -q "Link layer: Ethernet" "$work/ibstat" || fail "link layer"
    grep -q "State: Active" "$work/ibstat" || fail "state"
    ;;
  smpquery)
    devinfo softverbs0
    for route in "-D 0" "1"; do
      read -r -a r <<<"$route"
      if [ "${r[0]}" = -D ]; then opts=(-D); dest=0; else opts=(); dest=1; fi
      run nodeinfo smpquery "${opts[@]}" nodeinfo "$dest"
      expect "$work/nodeinfo" NodeType "Channel Adapter"
      expect "$work/nodeinfo" Guid "$node_guid"
      expect "$work/nodeinfo" PortGuid "$port_guid"
      run portinfo smpquery "${opts[@]}" portinfo "$dest"
      expect "$work/portinfo" Lid 1
      expect "$work/portinfo" SMLid 1
      expect "$work/portinfo" LinkState Active
      expect "$work/portinfo" PhysLinkState LinkUp
      expect "$work/portinfo" LinkWidthActive 4X
      expect "$work/portinfo" LinkSpeedExtActive "25.78125 Gbps"
      expect "$work/portinfo" NeighborMTU 4096
      run pkeys smpquery "${opts[@]}" pkeys "$dest"
      grep -q "0: 0xffff" "$work/pkeys" || fail "pkeys: $(cat "$work/pkeys")"
      run sl2vl smpquery "${opts[@]}" sl2vl "$dest"
      # The boot table: SL n on VL n mod 8.
      grep -q '^ports: in  0, out  0: | 0| 1| 2| 3| 4| 5| 6| 7| 0| 1| 2| 3| 4| 5| 6| 7|$' "$work/sl2vl" ||
        fail "sl2vl: $(cat "$work/sl2vl")"
      run vlarb smpquery "${opts[@]}" vlarb "$dest"
      grep -q "LowCap 8 HighCap 8" "$work/vlarb" || fail "vlarb: $(cat "$work/vlarb")"
      run nodedesc smpquery "${opts[@]}" nodedesc "$dest"
      grep -q "softverbs0" "$work/nodedesc" || fail "nodedesc: $(cat "$work/nodedesc")"
    done
    # An attribute the SMA has not: answered at once with status 0x0C, not timed out.
    start=$(date +%s%N)
    if timeout 20 smpquery -t 5000 switchinfo 1 >"$work/switchinfo" 2>&1; then fail "switchinfo answered"; fi
    elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    [ $elapsed_ms -lt 4000 ] || fail "switchinfo took ${elapsed_ms} ms: timed out instead of status 0x0C"
    ;;
  ibaddr-sminfo)
    devinfo softverbs0
    run ibaddr ibaddr
    grep -q "LID start 0x1 end 0x1" "$work/ibaddr" || fail "ibaddr: $(cat "$work/ibaddr")"
    run sminfo sminfo
    grep -q "sm lid 1 sm guid $(printf 0x%x "$port_guid").*SMINFO_MASTER" "$work/sminfo" || fail "sminfo: $(cat "$work/sminfo")"
    ;;
  unreachable)
    # A MAD to a LID nobody has, and a directed route out of the port: the
    # sender's timeout, bounded (libibmad: -t ms, 3 tries).
    start=$(date +%s%N)
    if timeout 20 smpquery -t 200 nodeinfo 7 >"$work/lid7" 2>&1; then fail "LID 7 answered"; fi
    if timeout 20 smpquery -t 200 -D nodeinfo 0,1 >"$work/dr" 2>&1; then fail "DR 0,1 answered"; fi
    elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    grep -q "failed" "$work/lid7" || fail "lid 7: $(cat "$work/lid7")"
    [ $elapsed_ms -lt 10000 ] || fail "the timeouts took ${elapsed_ms} ms"
    ;;
  perfquery)
    command -v ib_write_bw >/dev/null || { echo "SKIP: perftest is not installed"; exit 77; }
    run cpi perfquery
    grep -q "CapMask: 0x300" "$work/cpi" || fail "perfquery: $(cat "$work/cpi")"
    run before perfquery -x
    write_bw
    run after perfquery -x
    moved_words=$(( size * iters / 4 ))
    for f in PortXmitData PortRcvData; do
      grown=$(( $(field "$work/after" $f) - $(field "$work/before" $f) ))
      [ $grown -ge $moved_words ] || fail "$f grew by $grown words; ib_write_bw moved $moved_words"
      # Headers are counted too, but not more than a packet's worth per 256 B.
      [ $grown -le $(( moved_words * 2 )) ] || fail "$f grew by $grown words, far more than $moved_words"
    done
    pkts=$(( $(field "$work/after" PortXmitPkts) - $(field "$work/before" PortXmitPkts) ))
    [ $pkts -ge $(( size * iters / 4096 )) ] || fail "PortXmitPkts grew by $pkts"
    run small perfquery
    [ "$(field "$work/small" PortXmitData)" -gt 0 ] || fail "PortCounters PortXmitData is 0"
    # Reset: perfquery -x -r shows the counters, then clears them; the next read is near zero.
    run reset perfquery -x -r
    run cleared perfquery -x
    [ "$(field "$work/cleared" PortXmitData)" -lt 1000 ] || fail "after -r: $(cat "$work/cleared")"
    run reset32 perfquery -r
    run cleared32 perfquery
    [ "$(field "$work/cleared32" PortXmitData)" -lt 1000 ] || fail "after -r: $(cat "$work/cleared32")"    expect "$work/small" PortXmitDiscards 0
    ;;
  vlcounters)
    # Issue 20: PortVLOpPackets/PortVLOpData count what the port received
    # per VL, PortOpRcvCounters all it received; the flow control counters
    # answer 0 (no link-level flow control). The boot SL2VL table maps SL n
    # to VL n mod 8, so a run on SL3 is on VL3 and on no other VL.
    # A fresh device: nothing counted, and no OpCode selected yet (a
    # perfquery -R would select OpCode 0, RC SEND FIRST: the opselect scenario).
    command -v ib_write_bw >/dev/null || { echo "SKIP: perftest is not installed"; exit 77; }
    run zero perfquery --vloppackets
    expect "$work/zero" PortVLOpPackets3 0
    bw_args="--sl 3" write_bw
    run pkts perfquery --vloppackets
    run data perfquery --vlopdata
    run op perfquery --oprcvcounters
    run fc perfquery --flowctlcounters
    run fcerr perfquery --vlxmitflowctlerrors
    moved_words=$(( size * iters / 4 ))
    min_pkts=$(( size * iters / 4096 ))
    for vl in $(seq 0 15); do
      if [ "$vl" = 3 ]; then
        p=$(field "$work/pkts" PortVLOpPackets3) d=$(field "$work/data" PortVLOpData3)
        echo "VL3: $p packets, $d words received (ib_write_bw wrote $moved_words words)"
        [ "$p" -ge $min_pkts ] || { cat "$work/pkts" >&2; fail "PortVLOpPackets3 is $p"; }
        [ "$d" -ge $moved_words ] && [ "$d" -le $(( moved_words * 2 )) ] ||
          { cat "$work/data" >&2; fail "PortVLOpData3 is $d, ib_write_bw moved $moved_words words"; }
      else
        expect "$work/pkts" "PortVLOpPackets$vl" 0
        expect "$work/data" "PortVLOpData$vl" 0
      fi
      expect "$work/fcerr" "PortVLXmitFlowCtlUpdateErrors$vl" 0
    done
    [ "$(field "$work/op" PortOpRcvPkts)" -ge $min_pkts ] || fail "PortOpRcvPkts: $(cat "$work/op")"
    [ "$(field "$work/op" PortOpRcvData)" -ge $moved_words ] || fail "PortOpRcvData: $(cat "$work/op")"
    expect "$work/fc" PortXmitFlowPkts 0
    expect "$work/fc" PortRcvFlowPkts 0
    # perfquery -R clears them: VL3 reads 0 again (nothing else moves now).
    run clear perfquery --vloppackets -R
    run cleared perfquery --vloppackets
    expect "$work/cleared" PortVLOpPackets3 0
    run cleared-data perfquery --vlopdata
    [ "$(field "$work/cleared-data" PortVLOpData3)" -gt 0 ] || fail "a reset of PortVLOpPackets cleared PortVLOpData"
    ;;
  opselect)
    # Issue 20: the OpCode of PortOpRcvCounters, PortVLOpPackets and
    # PortVLOpData selects the BTH opcode they count (IBA 16.1.4). Messages
    # of 1 KiB are one RDMA WRITE ONLY packet each (MTU 4096), so a WRITE
    # ONLY selector counts every message ib_write_bw sent; perfquery's own
    # reset sends OpCode 0 (RC SEND FIRST), and then nothing of the run counts.
    command -v ib_write_bw >/dev/null || { echo "SKIP: perftest is not installed"; exit 77; }
    select_tool=${3:?the opselect scenario needs softverbs_pma_select}
    size=1024 iters=300 bw_args="--sl 3"
    for attr in oprcv vloppackets vlopdata; do run "select-$attr" "$select_tool" $attr 0x0a; done
    grep -q "OpCode 0x0a status 0x0000" "$work/select-oprcv" || fail "the Set: $(cat "$work/select-oprcv")"
    write_bw
    run op perfquery --oprcvcounters
    run pkts perfquery --vloppackets
    run data perfquery --vlopdata
    ops=$(field "$work/op" PortOpRcvPkts) vl3=$(field "$work/pkts" PortVLOpPackets3)
    words=$(field "$work/data" PortVLOpData3) op_words=$(field "$work/op" PortOpRcvData)
    echo "RDMA WRITE ONLY selected: PortOpRcvPkts $ops, PortVLOpPackets3 $vl3, PortVLOpData3 $words (ib_write_bw: $iters x $size B)"
    # Every message once; the run's other packets (none: its handshake is TCP) would show as more.
    [ "$ops" -eq $iters ] || { cat "$work/op" >&2; fail "PortOpRcvPkts is $ops, not $iters"; }
    [ "$vl3" -eq $iters ] || { cat "$work/pkts" >&2; fail "PortVLOpPackets3 is $vl3, not $iters"; }
    # Each packet: 1024 B, with LRH, BTH and ICRC (24 B), in 4-octet words.
    [ "$words" -eq $(( iters * (size + 24) / 4 )) ] || { cat "$work/data" >&2; fail "PortVLOpData3 is $words"; }
    [ "$op_words" -eq "$words" ] || fail "PortOpRcvData $op_words, PortVLOpData3 $words"
    for vl in 0 1 2 4 5 6 7; do expect "$work/pkts" "PortVLOpPackets$vl" 0; done
    # perfquery -R: OpCode 0, RC SEND FIRST; a run of WRITEs counts none.
    for opt in oprcvcounters vloppackets vlopdata; do run "reset-$opt" perfquery --$opt -R; done
    write_bw
    run op2 perfquery --oprcvcounters
    run pkts2 perfquery --vloppackets
    run data2 perfquery --vlopdata
    expect "$work/op2" PortOpRcvPkts 0
    expect "$work/op2" PortOpRcvData 0
    expect "$work/pkts2" PortVLOpPackets3 0
    expect "$work/data2" PortVLOpData3 0
    # PortCounters counts every opcode still.
    run all perfquery
    [ "$(field "$work/all" PortRcvPkts)" -ge $(( 2 * iters )) ] || fail "PortRcvPkts: $(cat "$work/all")"
    ;;
  faults)
    # Packets the fault injector drops are what an operator sees as
    # PortXmitDiscards (the requester's retries still carry the run through).
    command -v ib_write_bw >/dev/null || { echo "SKIP: perftest is not installed"; exit 77; }
    SOFTVERBS_FAULTS=loss=0.02,seed=7 write_bw
    run counters perfquery
    [ "$(field "$work/counters" PortXmitDiscards)" -gt 0 ] || fail "no PortXmitDiscards: $(cat "$work/counters")"
    expect "$work/counters" PortRcvErrors 0
    ;;
  qos)
    # opensm, once (-o: one sweep, then it exits), with a QoS configuration:
    # the SMA takes its SL2VL and VLArb Sets and smpquery shows them. opensm
    # runs in the foreground under `timeout`; its cache and dumps stay in $work.
    command -v opensm >/dev/null || { echo "SKIP: opensm is not installed"; exit 77; }
    cat >"$work/opensm.conf" <<EOF
dump_files_dir $work
qos TRUE
qos_ca_max_vls 4
qos_ca_high_limit 2
qos_ca_vlarb_high 1:8,0:0
qos_ca_vlarb_low 0:1,2:3
qos_ca_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,15
EOF
    rc=0
    OSM_CACHE_DIR=$work timeout 60 opensm -o -F "$work/opensm.conf" -f "$work/opensm.log" >"$work/opensm.out" 2>&1 || rc=$?
    [ $rc -eq 0 ] || { tail -50 "$work/opensm.log" >&2; fail "opensm -o exited $rc"; }
    grep -q "SUBNET UP" "$work/opensm.log" || { tail -50 "$work/opensm.log" >&2; fail "opensm: no SUBNET UP"; }
    run sl2vl smpquery sl2vl 1
    grep -q '^ports: in  0, out  0: | 0| 1| 2| 3| 0| 1| 2| 3| 0| 1| 2| 3| 0| 1| 2|15|$' "$work/sl2vl" ||
      fail "sl2vl is not the config's: $(cat "$work/sl2vl")"
    run vlarb smpquery vlarb 1
    # Low priority first, then high; entries the config leaves out are VL0 weight 0.
    awk '/^VL /||/^WEIGHT/' "$work/vlarb" >"$work/vlarb.rows"
    cat >"$work/vlarb.want" <<'EOF'
VL    : |0x0 |0x2 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |
WEIGHT: |0x1 |0x3 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |
VL    : |0x1 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |
WEIGHT: |0x8 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |
EOF
    diff "$work/vlarb.want" "$work/vlarb.rows" >&2 || fail "vlarb is not the config's"
    # opensm sends OperVLs and VLHighLimit only to a port with a neighbour
    # (osm_link_mgr.c); ibportstate's PortInfo Set programs OperVLs here.
    run vls ibportstate 1 1 vls 2
    run portinfo smpquery portinfo 1
    expect "$work/portinfo" OperVLs VL0-1
    expect "$work/portinfo" VLCap VL0-7
    # Beyond VLCap: refused (status 0x1C), the port unchanged.
    if timeout 20 ibportstate 1 1 vls 5 >"$work/vls5" 2>&1; then fail "OperVLs VL0-14 accepted"; fi
    run portinfo smpquery portinfo 1
    expect "$work/portinfo" OperVLs VL0-1
    # The data path: SL15 is on VL15, so its requests are discarded before
    # they leave (PortXmitDiscards) and the RC requester retries until
    # retry_cnt is spent; SL1 (VL1) flows. The server of the failed run
    # never hears back: it is killed by PID.
    command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils is not installed"; exit 77; }
    run before perfquery
    pp_port=$(free_tcp_port 18000)
    while [ -n "$(ss -Hltn "( sport = :$pp_port )" 2>/dev/null)" ]; do pp_port=$((pp_port + 1)); done
    timeout 30 ibv_rc_pingpong -d softverbs0 -p "$pp_port" -l 15 -n 10 >"$work/server15.out" 2>&1 &
    server=$!
    for _ in $(seq 100); do
      rc=0
      timeout 30 ibv_rc_pingpong -d softverbs0 -p "$pp_port" -l 15 -n 10 localhost >"$work/client15.out" 2>&1 || rc=$?
      grep -q "Couldn't connect" "$work/client15.out" && kill -0 "$server" 2>/dev/null || break
      sleep 0.1
    done
    [ $rc -ne 0 ] || fail "ibv_rc_pingpong on SL15 (VL15) succeeded"
    grep -q "retry counter exceeded" "$work/client15.out" || { cat "$work/client15.out" >&2; fail "SL15: not retry exceeded"; }
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    server=
    run after perfquery
    discards=$(( $(field "$work/after" PortXmitDiscards) - $(field "$work/before" PortXmitDiscards) ))
    [ $discards -ge 1 ] || fail "SL15's requests not counted in PortXmitDiscards"
    pp_port=$((pp_port + 1))
    timeout 30 ibv_rc_pingpong -d softverbs0 -p "$pp_port" -l 1 -n 10 >"$work/server1.out" 2>&1 &
    server=$!
    for _ in $(seq 100); do
      rc=0
      timeout 30 ibv_rc_pingpong -d softverbs0 -p "$pp_port" -l 1 -n 10 localhost >"$work/client1.out" 2>&1 || rc=$?
      grep -q "Couldn't connect" "$work/client1.out" && kill -0 "$server" 2>/dev/null || break
      sleep 0.1
    done
    [ $rc -eq 0 ] || { cat "$work/client1.out" >&2; fail "ibv_rc_pingpong on SL1 exited $rc"; }
    wait "$server" || fail "ibv_rc_pingpong server on SL1 failed"
    server=
    # UD: the AH's SL. The client's first SEND on SL15 is discarded, so
    # neither side ever hears the other: both are stopped by timeout.
    command -v ibv_ud_pingpong >/dev/null || { echo "SKIP: ibverbs-utils is not installed"; exit 77; }
    run before perfquery
    pp_port=$((pp_port + 1))
    timeout 3 ibv_ud_pingpong -d softverbs0 -p "$pp_port" -l 15 -n 5 >"$work/udserver.out" 2>&1 &
    server=$!
    for _ in $(seq 20); do
      rc=0
      timeout 3 ibv_ud_pingpong -d softverbs0 -p "$pp_port" -l 15 -n 5 localhost >"$work/udclient.out" 2>&1 || rc=$?
      grep -q "Couldn't connect" "$work/udclient.out" && kill -0 "$server" 2>/dev/null || break
      sleep 0.1
    done
    [ $rc -eq 124 ] || { cat "$work/udclient.out" >&2; fail "ibv_ud_pingpong on SL15 exited $rc, expected a timeout"; }
    wait "$server" 2>/dev/null || true
    server=
    run after perfquery
    discards=$(( $(field "$work/after" PortXmitDiscards) - $(field "$work/before" PortXmitDiscards) ))
    [ $discards -ge 1 ] || fail "UD SL15's SEND not counted in PortXmitDiscards"
    ;;
  *)
    fail "unknown scenario"
    ;;
esac
echo "PASS: $scenario"
