#!/usr/bin/env bash
# Debian's infiniband-diags, unmodified, on a subnet from a topology file
# (SOFTVERBS_TOPOLOGY, issue 19): two switches joined by two links and four
# CAs, the device's port being the first linked CA's port 1. The subnet's SMAs answer
# through our libibumad.so.3 (src/mad/subnet_sma.cc).
#   topology_tools.sh <dir of libibumad.so.3 and libibverbs.so.1> <scenario>
# Scenarios: discover (directed-route discovery before any SM), off-fabric
# (paths that leave the fabric time out), bad-file (a broken topology is
# refused with its line), ibsim-nets (ibsim's example nets load and are
# discovered), opensm (opensm -o brings the subnet up: LIDs, forwarding
# tables, ACTIVE ports, and the LID-routed tools on top, directed routes
# with a LID-routed first part included). Every tool, opensm
# included, runs in the foreground under `timeout`; nothing is left running.
# sm-none: SOFTVERBS_SM=none without a topology. qos: the CAs' QoS tables
# from the topology file's "# softverbs: qos_ca_*" lines, with no SM.
# qos-switch: the switches' from its qos_sw0_*/qos_swe_* lines (and qos_*),
# then opensm's (qos TRUE) by SMPs.
# perfquery: after opensm, every node's PMA answers (src/mad/subnet_pma.cc);
# ib_write_bw's traffic shows on the device's port and, mirrored, on the
# facing switch port (per VL too), and nowhere else; -R/-r reset.
# ibqueryerrors: without
# faults it reports nothing (--details too: every PMA answers the details
# attributes); with drops and corruption injected during a data run it
# names the device's link and only that, and perfquery --rcverr shows the
# corruption as local physical errors. ib_write_bw's server is killed by PID.
# port-state: the data path, ibstat and ibstatus follow the port's state
# before and after opensm -o (ibv_rc_pingpong fails, then passes; its
# discards are perfquery --xmtdisc's PortInactiveDiscards).
# sa: opensm left running (in the background, by PID, killed at the end)
# serves its SA and SMInfo to the tools in other processes (saquery's
# multi-MAD tables need RMPP); once it is gone, they time out.
# mcast-sm (issue 18): with opensm running, perftest's UD multicast (-g:
# an SA MCMemberRecord join, then ibv_attach_mcast with the MGID and the
# MLID opensm hands out) moves its data between two processes, saquery -g
# shows the groups while they run, and both processes' SA leaves succeed.
# issm: the device port's IsSM bit (smpquery portinfo, ibstat, saquery -s)
# while opensm runs, and not after it is killed.
# sm-tools: with opensm running, ibqueryerrors without --skip-sl (it asks
# the SA for SLs) names the device's link after a faulty data run; ibping
# and ibsysstat round trips to a server in another process (vendor classes).
# traps: with opensm running without periodic sweeps (-s 0), ibportstate
# disabling a switch port makes the switch send trap 128 (IBA 14.2.5.1) to
# opensm, which logs it from the switch's LID and re-sweeps because of it;
# iblinkinfo then shows the link down; enabling it again brings it back.
# Then a GMP the device's QP1 drops for its P_Key (softverbs_bad_pkey_gmp)
# reaches opensm as trap 257 (Bad P_Key).
# multi-ca: the topology's other CAs as devices softverbs1..3, and
# ibv_rc_pingpong between two of them following the routes opensm
# programmed (failing before it, and across a disabled switch port),
# counted by perfquery on the switch ports of their route alone.
# route-sl: that traffic per SL and per VL (perfquery -X/-S, --vloppackets)
# as each hop's SL2VL table maps it, and dropped where one maps it to VL15.
# mcast-route: UD multicast between the CAs through the switches'
# MulticastForwardingTables (set by SMPs), reaching only the CAs on them.
set -euo pipefail
lib=$1
scenario=$2
export LD_LIBRARY_PATH=$lib
export SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-conf-topo-$scenario-$$
work=$(mktemp -d)
server=
sm_pid=
poller=
poller0=
cleanup() {
  if [ -n "$server" ]; then
    kill -TERM "$server" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  if [ -n "$poller" ]; then kill -KILL "$poller" 2>/dev/null || true; wait "$poller" 2>/dev/null || true; fi
  if [ -n "$poller0" ]; then kill -KILL "$poller0" 2>/dev/null || true; wait "$poller0" 2>/dev/null || true; fi
  if [ -n "$sm_pid" ]; then kill -KILL "$sm_pid" 2>/dev/null || true; wait "$sm_pid" 2>/dev/null || true; fi
  rm -rf "$SOFTVERBS_DEVICE_PATH" "$SOFTVERBS_DEVICE_PATH".* "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $scenario: $*" >&2; exit 1; }
command -v smpquery >/dev/null || { echo "SKIP: infiniband-diags is not installed"; exit 77; }

run_timeout=30
. "$(dirname "$0")/diag_output.sh"

cat >"$work/fabric.net" <<'EOF'
# the device's CA first: its port 1 is softverbs0's port
Hca 1 "host-0"
[1] "leaf-a"[1]

Switch 8 "leaf-a"
[2] "host-1"[1]
[7] "leaf-b"[7]
[8] "leaf-b"[8]

switchguid=0x0011750000000200
Switch 8 "leaf-b"
[1] "host-2"[1]
[2] "host-3"[2]

Hca 1 "host-1"
caguid=0x0011750000000300
Hca 2 "host-2"
Hca 2 "host-3"
EOF
export SOFTVERBS_TOPOLOGY=$work/fabric.net

# sm_sweep: opensm -o, once (one sweep, then it exits); its cache and log stay in $work.
sm_sweep() {
  command -v opensm >/dev/null || { echo "SKIP: opensm is not installed"; exit 77; }
  local rc=0
  OSM_CACHE_DIR=$work timeout 60 opensm -o ${osm_partitions:+-P "$osm_partitions"} -f "$work/opensm.log" >"$work/opensm.out" 2>&1 || rc=$?
  [ $rc -eq 0 ] || { tail -50 "$work/opensm.log" >&2; fail "opensm -o exited $rc"; }
  grep -q "SUBNET UP" "$work/opensm.log" || { tail -50 "$work/opensm.log" >&2; fail "opensm: no SUBNET UP"; }
}
# lid_of NAME: the LID ibnetdiscover ($work/net) gives the node NAME (a
# switch's port 0, a CA's first port).
lid_of() {
  awk -v n="\"$1\"" '$0 ~ "# " n " base port 0 lid" { print $(NF-2); exit }
    $1 ~ /^\[/ && index($0, "# " n " lid ") { sub(/.*# .* lid /, ""); print $1; exit }' "$work/net"
}
# write_bw ITERS: Debian's ib_write_bw, server and client on softverbs0.
write_bw() {
  command -v ib_write_bw >/dev/null || { echo "SKIP: perftest is not installed"; exit 77; }
  . "$(dirname "$0")/ports.sh"
  local port rc
  port=$(free_tcp_port 17000)
  timeout 60 ib_write_bw -d softverbs0 -p "$port" -s 4096 -n "$1" >"$work/server.out" 2>&1 &
  server=$!
  # The client does not retry its TCP connect: retry until the server listens.
  for _ in $(seq 100); do
    rc=0
    timeout 60 ib_write_bw -d softverbs0 -p "$port" -s 4096 -n "$1" localhost >"$work/client.out" 2>&1 || rc=$?
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

# sm_start [OPENSM ARGS...]: opensm left running in the background (killed
# by PID at exit) until SUBNET UP; -d 2 flushes its log after each line.
sm_start() {
  command -v opensm >/dev/null || { echo "SKIP: opensm is not installed"; exit 77; }
  OSM_CACHE_DIR=$work opensm -d 2 "$@" -f "$work/opensm.log" >"$work/opensm.out" 2>&1 &
  sm_pid=$!
  for _ in $(seq 150); do
    grep -q "SUBNET UP" "$work/opensm.log" 2>/dev/null && break
    kill -0 "$sm_pid" 2>/dev/null || { cat "$work/opensm.out" >&2; fail "opensm exited"; }
    sleep 0.2
  done
  grep -q "SUBNET UP" "$work/opensm.log" || { tail -50 "$work/opensm.log" >&2; fail "opensm: no SUBNET UP in 30 s"; }
}
# perf_pair NAME TOOL ARGS...: Debian's perftest TOOL, server and client on
# softverbs0; both must exit 0. Outputs: $work/NAME.server, $work/NAME.client.
perf_pair() {
  command -v "$2" >/dev/null || { echo "SKIP: perftest is not installed"; exit 77; }
  . "$(dirname "$0")/ports.sh"
  local name=$1 tool=$2 port rc
  shift 2
  port=$(free_tcp_port 17500)
  timeout 60 "$tool" -d softverbs0 -p "$port" "$@" >"$work/$name.server" 2>&1 &
  server=$!
  for _ in $(seq 100); do
    rc=0
    timeout 60 "$tool" -d softverbs0 -p "$port" "$@" localhost >"$work/$name.client" 2>&1 || rc=$?
    if [ $rc -ne 0 ] && grep -q "Couldn't connect" "$work/$name.client" && kill -0 "$server" 2>/dev/null; then
      sleep 0.1
    else
      break
    fi
  done
  [ $rc -eq 0 ] || { cat "$work/$name.client" >&2; fail "$tool $* (client) exited $rc"; }
  rc=0
  wait "$server" || rc=$?
  server=
  [ $rc -eq 0 ] || { cat "$work/$name.server" >&2; fail "$tool $* (server) exited $rc"; }
  ! grep -qi "couldn't\|failed\|error" "$work/$name.client" "$work/$name.server" ||
    { cat "$work/$name.client" "$work/$name.server" >&2; fail "$tool $* reported an error"; }
}

# Between the topology's CAs (multi-ca, route-sl): Debian's ibv_rc_pingpong
# (or $pp_tool) with its server on one device and its client on another.
pingpong_ca() {  # NAME SERVER_DEVICE CLIENT_DEVICE [ARGS...]: the client's exit status
  local name=$1 sdev=$2 cdev=$3 port rc=0
  shift 3
  port=$(free_tcp_port 19300)
  timeout 30 "${pp_tool:-ibv_rc_pingpong}" -d "$sdev" -p "$port" -n 5 "$@" >"$work/$name.server" 2>&1 &
  server=$!
  for _ in $(seq 50); do
    rc=0
    timeout 30 "${pp_tool:-ibv_rc_pingpong}" -d "$cdev" -p "$port" -n 5 "$@" localhost >"$work/$name.client" 2>&1 || rc=$?
    grep -q "Couldn't connect" "$work/$name.client" || break
    sleep 0.1
  done
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=
  return $rc
}
# must_fail NAME SERVER CLIENT: the client's requests are lost on the
# way, so retry-exceeded within 10 s.
must_fail() {
  local start elapsed_ms
  start=$(date +%s%N)
  ! pingpong_ca "$@" || { cat "$work/$1.client" >&2; fail "$1: ibv_rc_pingpong $2 <- $3 passed"; }
  elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  grep -qi 'retry.*exceeded\|RETRY_EXC' "$work/$1.client" || { cat "$work/$1.client" >&2; fail "$1: no retry-exceeded error"; }
  [ "$elapsed_ms" -lt 10000 ] || fail "$1: took ${elapsed_ms} ms to fail"
  echo "$1 ($2 <- $3): $(grep -m1 -i 'retry' "$work/$1.client") (${elapsed_ms} ms)"
}
must_pass() {
  pingpong_ca "$@" || { cat "$work/$1.client" "$work/$1.server" >&2; fail "$1: ibv_rc_pingpong $2 <- $3 failed"; }
  echo "$1 ($2 <- $3 ${*:4}): $(tail -n 1 "$work/$1.client")"
}
case $scenario in
  discover)
    # One hop: the first switch, reached through its port 1.
    run ni1 smpquery -D nodeinfo 0,1
    expect "$work/ni1" NodeType Switch
    expect "$work/ni1" NumPorts 8
    expect "$work/ni1" LocalPort 1
    # Three hops, across the second switch, to a two-port CA.
    run ni3 smpquery -D nodeinfo 0,1,7,1
    expect "$work/ni3" NodeType "Channel Adapter"
    expect "$work/ni3" NumPorts 2
    expect "$work/ni3" Guid 0x0011750000000300
    expect "$work/ni3" PortGuid 0x0011750000000301
    run nd smpquery -D nodedesc 0,1,8
    grep -q 'leaf-b' "$work/nd" || { cat "$work/nd" >&2; fail "nodedesc of 0,1,8 is not leaf-b"; }
    # Before any SM: the remote ports are INIT with LID 0; an unlinked one DOWN.
    run pi smpquery -D portinfo 0,1,7,1
    expect "$work/pi" LinkState Initialize
    expect "$work/pi" Lid 0
    run pi3 smpquery -D portinfo 0,1 3
    expect "$work/pi3" LinkState Down
    expect "$work/pi3" PhysLinkState Polling
    run si smpquery -D switchinfo 0,1,7
    expect "$work/si" LinearFdbCap 3072
    # ibnetdiscover walks the whole subnet: 2 switches, 4 CAs, 6 links each way.
    run net ibnetdiscover
    [ "$(grep -c '^Switch' "$work/net")" = 2 ] || { cat "$work/net" >&2; fail "ibnetdiscover: not 2 switches"; }
    [ "$(grep -c '^Ca' "$work/net")" = 4 ] || { cat "$work/net" >&2; fail "ibnetdiscover: not 4 CAs"; }
    [ "$(grep -c '^\[' "$work/net")" = 12 ] || { cat "$work/net" >&2; fail "ibnetdiscover: not 12 link ends"; }
    grep -q '"leaf-b" base port 0 lid 0' "$work/net" || { cat "$work/net" >&2; fail "leaf-b not discovered"; }
    # Its output is a topology file in turn: the same subnet, GUIDs and all.
    run net2 env SOFTVERBS_TOPOLOGY="$work/net" SOFTVERBS_DEVICE_PATH="$SOFTVERBS_DEVICE_PATH.2" ibnetdiscover
    rm -f "$SOFTVERBS_DEVICE_PATH".2*
    [ "$(grep -c '^Switch' "$work/net2")" = 2 ] && [ "$(grep -c '^Ca' "$work/net2")" = 4 ] ||
      { cat "$work/net2" >&2; fail "ibnetdiscover's own output does not load"; }
    grep -q 'switchguid=0x11750000000200' "$work/net2" || { cat "$work/net2" >&2; fail "GUIDs did not survive"; }
    ;;
  off-fabric)
    # A port without a link, a port the switch lacks, a CA in the middle of
    # a path: nothing carries the SMP, and the tool times out as on hardware.
    for path in 0,1,3 0,1,9 0,1,2,1 0,2; do
      rc=0
      timeout 30 smpquery -D -t 200 nodeinfo $path >"$work/out" 2>&1 || rc=$?
      [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/out" >&2; fail "smpquery -D nodeinfo $path exited $rc"; }
      grep -qi 'timeout\|failed' "$work/out" || { cat "$work/out" >&2; fail "$path: no timeout reported"; }
    done
    # A LID no port has (no SM has run): also unreachable.
    rc=0
    timeout 30 smpquery -t 200 nodeinfo 7 >"$work/out" 2>&1 || rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "smpquery nodeinfo 7 exited $rc"
    ;;
  bad-file)
    printf 'Switch 8 "s"\n[9] "h"[1]\n\nHca 1 "h"\n' >"$work/bad.net"
    rc=0
    SOFTVERBS_TOPOLOGY=$work/bad.net timeout 30 smpquery -D nodeinfo 0 >"$work/out" 2>&1 || rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/out" >&2; fail "a bad topology was used (exit $rc)"; }
    grep -q 'line 2: "s" has no port 9' "$work/out" || { cat "$work/out" >&2; fail "the error does not name the line"; }
    rc=0
    SOFTVERBS_TOPOLOGY=$work/missing.net timeout 30 smpquery -D nodeinfo 0 >"$work/out" 2>&1 || rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "a missing topology was used (exit $rc)"
    grep -q 'cannot read' "$work/out" || { cat "$work/out" >&2; fail "the error does not say the file is missing"; }
    ;;
  ibsim-nets)
    dir=/usr/share/doc/ibsim-utils/net-examples
    [ -r $dir/net.2sw2path4hca ] || { echo "SKIP: ibsim-utils' example nets are not installed"; exit 77; }
    # Their CAs come after the switches; the device is the first CA with a linked port 1.
    for net in net net.1 net.2sw2path net.2sw2path4hca net.2sw2path4hca2port; do
      run "$net" env SOFTVERBS_TOPOLOGY=$dir/$net ibnetdiscover
      grep -q '^Switch' "$work/$net" || { cat "$work/$net" >&2; fail "$net: no switch discovered"; }
      rm -f "$SOFTVERBS_DEVICE_PATH".subnet-*
    done
    [ "$(grep -c '^Ca' "$work/net.2sw2path4hca")" = 4 ] || { cat "$work/net.2sw2path4hca" >&2; fail "net.2sw2path4hca: not 4 CAs"; }
    ;;
  opensm)
    command -v opensm >/dev/null || { echo "SKIP: opensm is not installed"; exit 77; }
    # Before the SM: no port has a LID, the device's own included (a
    # topology leaves the port to an external SM: INIT, LID 0, no IsSM).
    run pre ibnetdiscover
    grep -q '"leaf-b" base port 0 lid 0' "$work/pre" || { cat "$work/pre" >&2; fail "leaf-b has a LID before opensm"; }
    run local0 smpquery -D portinfo 0
    expect "$work/local0" Lid 0
    expect "$work/local0" LinkState Initialize
    run stat0 ibstat softverbs0 1
    grep -q 'State: Initializing' "$work/stat0" || { cat "$work/stat0" >&2; fail "ibstat does not show INIT"; }
    # One sweep (-o), then it exits; its cache and log stay in $work.
    rc=0
    OSM_CACHE_DIR=$work timeout 60 opensm -o ${osm_partitions:+-P "$osm_partitions"} -f "$work/opensm.log" >"$work/opensm.out" 2>&1 || rc=$?
    [ $rc -eq 0 ] || { tail -50 "$work/opensm.log" >&2; fail "opensm -o exited $rc"; }
    grep -q "SUBNET UP" "$work/opensm.log" || { tail -50 "$work/opensm.log" >&2; fail "opensm: no SUBNET UP"; }
    # Every port with a link is ACTIVE with a LID of its own, the SM's LID set.
    run net ibnetdiscover
    if grep -E '^\[' "$work/net" | grep -q ' lid 0 '; then cat "$work/net" >&2; fail "a port without a LID"; fi
    # The device's port too, as ibv_query_port (ibstat) reports it.
    run local smpquery -D portinfo 0
    expect "$work/local" LinkState Active
    local_lid=$(field "$work/local" Lid)
    [ "$local_lid" -gt 0 ] || fail "the device's port has no LID"
    expect "$work/local" SMLid "$local_lid"
    run stat ibstat softverbs0 1
    grep -q 'State: Active' "$work/stat" && grep -q "Base lid: $local_lid\$" "$work/stat" ||
      { cat "$work/stat" >&2; fail "ibstat does not show the SM's LID and ACTIVE"; }
    run pi smpquery -D portinfo 0,1,7,1
    expect "$work/pi" LinkState Active
    expect "$work/pi" SMLid "$local_lid"
    lid=$(field "$work/pi" Lid)
    [ "$lid" -gt 1 ] || fail "host-2 has LID $lid"
    # LID-routed now: through both switches' LFTs, as opensm programmed them.
    run nd smpquery nodedesc "$lid"
    grep -q 'host-2' "$work/nd" || { cat "$work/nd" >&2; fail "LID $lid is not host-2"; }
    run tr ibtracert "$local_lid" "$lid"
    [ "$(grep -c -- '-> switch port' "$work/tr")" = 2 ] || { cat "$work/tr" >&2; fail "ibtracert: not two switches"; }
    leaf_b=$(awk '/"leaf-b" base port 0 lid/ { print $(NF-2); exit }' "$work/net")
    run rt ibroute "$leaf_b"
    grep -q '^6 valid lids dumped' "$work/rt" || { cat "$work/rt" >&2; fail "ibroute: not 6 LIDs routed"; }
    # A directed route with a LID-routed first part (smpquery -c LID,PATH:
    # DrSLID is the sender's LID, IBA 14.2.2): to leaf-b by LID, then out of
    # its port 1 to host-2; out of an unlinked port it is lost.
    run comb0 smpquery -c nodeinfo "$leaf_b,0"
    expect "$work/comb0" NodeType Switch
    expect "$work/comb0" Guid 0x0011750000000200
    run comb smpquery -c nodedesc "$leaf_b,0,1"
    grep -q 'host-2' "$work/comb" || { cat "$work/comb" >&2; fail "$leaf_b,0,1 is not host-2"; }
    rc=0
    timeout 30 smpquery -t 200 -c nodeinfo "$leaf_b,0,3" >"$work/comb3" 2>&1 || rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/comb3" >&2; fail "smpquery -c $leaf_b,0,3 exited $rc"; }
    run links iblinkinfo
    [ "$(grep -c 'Active/  LinkUp' "$work/links")" = 12 ] || { cat "$work/links" >&2; fail "iblinkinfo: not 12 active link ends"; }
    # opensm -o has exited: no SM answers SMInfo now, as on hardware.
    rc=0
    timeout 30 sminfo -t 200 >"$work/sm" 2>&1 || rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/sm" >&2; fail "sminfo found an SM after opensm exited"; }
    ;;
  qos)
    # Issue 20: the CAs' QoS tables from the topology file, with no SM to
    # send them: the device's port and another CA's show them, and the data
    # path follows them (SL15 on VL15: discarded). The built-in SM gives the
    # port its LID, which ibv_rc_pingpong needs, and programs no tables.
    command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibv_rc_pingpong is not installed"; exit 77; }
    { printf '%s\n' '# softverbs: qos_ca_max_vls 4' '# softverbs: qos_ca_high_limit 2' \
        '# softverbs: qos_ca_vlarb_high 1:8,0:0' '# softverbs: qos_ca_vlarb_low 0:1,2:3' \
        '# softverbs: qos_ca_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,15'
      cat "$work/fabric.net"; } >"$work/qos.net"
    export SOFTVERBS_TOPOLOGY=$work/qos.net SOFTVERBS_SM=builtin
    printf '%s\n' 'VL    : |0x0 |0x2 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |' 'WEIGHT: |0x1 |0x3 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |' \
      'VL    : |0x1 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |' 'WEIGHT: |0x8 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |' \
      >"$work/vlarb.want"
    for path in 0 0,1,7,1; do
      run "sl2vl-$path" smpquery -D sl2vl "$path"
      grep -q '| 0| 1| 2| 3| 0| 1| 2| 3| 0| 1| 2| 3| 0| 1| 2|15|' "$work/sl2vl-$path" ||
        { cat "$work/sl2vl-$path" >&2; fail "SL2VL of $path is not the file's"; }
      run "vlarb-$path" smpquery -D vlarb "$path"
      awk '/^VL /||/^WEIGHT/' "$work/vlarb-$path" >"$work/vlarb-$path.rows"
      diff "$work/vlarb.want" "$work/vlarb-$path.rows" >&2 || fail "VLArb of $path is not the file's"
      run "pi-$path" smpquery -D portinfo "$path"
      expect "$work/pi-$path" OperVLs VL0-3
      expect "$work/pi-$path" VLHighLimit 2
    done
    # A switch's ports keep their boot tables (the file gives CAs' only).
    run sw smpquery -D sl2vl 0,1 2,1
    grep -q '| 0| 1| 2| 3| 4| 5| 6| 7| 0| 1| 2| 3| 4| 5| 6| 7|' "$work/sw" ||
      { cat "$work/sw" >&2; fail "a switch port took the CAs' SL2VL"; }
    . "$(dirname "$0")/ports.sh"
    pingpong() {  # SL: a short ibv_rc_pingpong on SL; the client's exit status
      local port rc=0 spid
      port=$(free_tcp_port $(( 19000 + $1 )))
      timeout 30 ibv_rc_pingpong -d softverbs0 -p "$port" -l "$1" -n 20 >"$work/pp$1.server" 2>&1 &
      spid=$!
      for _ in $(seq 50); do
        rc=0
        timeout 30 ibv_rc_pingpong -d softverbs0 -p "$port" -l "$1" -n 20 localhost >"$work/pp$1.client" 2>&1 || rc=$?
        grep -q "Couldn't connect" "$work/pp$1.client" || break
        sleep 0.1
      done
      kill "$spid" 2>/dev/null || true
      wait "$spid" 2>/dev/null || true
      return $rc
    }
    pingpong 1 || fail "ibv_rc_pingpong -l 1: $(cat "$work/pp1.client")"
    ! pingpong 15 || fail "ibv_rc_pingpong -l 15 ran: SL15 is on VL15"
    echo "ibv_rc_pingpong: -l 1 $(tail -n 1 "$work/pp1.client"); -l 15 $(grep -m1 -i "failed\|error" "$work/pp15.client")"
    run pc perfquery
    [ "$(field "$work/pc" PortXmitDiscards)" -gt 0 ] || { cat "$work/pc" >&2; fail "no PortXmitDiscards"; }
    # A table the port could not take is refused with its line.
    printf '%s\n' '# softverbs: qos_ca_max_vls 2' '# softverbs: qos_ca_sl2vl 0,1,2,3,0,1,2,3,0,1,2,3,0,1,2,15' >"$work/badqos.net"
    cat "$work/fabric.net" >>"$work/badqos.net"
    rc=0
    SOFTVERBS_TOPOLOGY=$work/badqos.net timeout 30 smpquery -D nodeinfo 0 >"$work/out" 2>&1 || rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/out" >&2; fail "a table for VLs that are not there was used"; }
    grep -q 'SL2 on VL2, which is not operational' "$work/out" || { cat "$work/out" >&2; fail "the error does not say why"; }
    ;;
  qos-switch)
    # Issue 20: the switches' QoS tables from the topology file's
    # qos_sw0_* (port 0) and qos_swe_* (ports 1-8) lines, what they leave
    # out from the qos_* defaults (as opensm builds them; the CAs take the
    # defaults too), with no SM to send them. smpquery walks every input
    # port of an output port's SL2VL; after opensm -o (qos off: it sends no
    # tables) the LID-routed queries read the same; with qos TRUE opensm's.
    swe='| 3| 2| 1| 0| 3| 2| 1| 0| 3| 2| 1| 0| 3| 2| 1|15|'
    sw0='| 0| 1| 0| 1| 0| 1| 0| 1| 0| 1| 0| 1| 0| 1| 0| 1|'
    { printf '%s\n' '# softverbs: qos_max_vls 4' '# softverbs: qos_high_limit 3' \
        '# softverbs: qos_sw0_max_vls 2' '# softverbs: qos_sw0_sl2vl 0,1,0,1,0,1,0,1,0,1,0,1,0,1,0,1' \
        '# softverbs: qos_swe_vlarb_high 3:16' '# softverbs: qos_swe_vlarb_low 0:2,1:2,2:4' \
        '# softverbs: qos_swe_sl2vl 3,2,1,0,3,2,1,0,3,2,1,0,3,2,1,15'
      cat "$work/fabric.net"; } >"$work/swqos.net"
    export SOFTVERBS_TOPOLOGY=$work/swqos.net
    printf '%s\n' 'VL    : |0x0 |0x1 |0x2 |0x0 |0x0 |0x0 |0x0 |0x0 |' 'WEIGHT: |0x2 |0x2 |0x4 |0x0 |0x0 |0x0 |0x0 |0x0 |' \
      'VL    : |0x3 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |' 'WEIGHT: |0x10|0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |0x0 |' \
      >"$work/swe.want"
    # sl2vl_rows FILE OUT TABLE: every input port (0-8) of output port OUT maps by TABLE.
    sl2vl_rows() {
      [ "$(grep -cF -- "out $(printf '%2d' "$2"): $3" "$1")" = 9 ] || { cat "$1" >&2; fail "$1: not 9 input ports with $3"; }
    }
    vlarb_rows() {  # FILE WANT
      awk '/^VL /||/^WEIGHT/' "$1" >"$1.rows"
      diff "$2" "$1.rows" >&2 || fail "VLArb in $1 is not the file's"
    }
    for sw in 0,1 0,1,7; do  # leaf-a, then leaf-b
      run "sl2vl-$sw-2" smpquery -D sl2vl "$sw" 2
      sl2vl_rows "$work/sl2vl-$sw-2" 2 "$swe"
      run "sl2vl-$sw-0" smpquery -D sl2vl "$sw" 0
      sl2vl_rows "$work/sl2vl-$sw-0" 0 "$sw0"
      run "vlarb-$sw-7" smpquery -D vlarb "$sw" 7
      vlarb_rows "$work/vlarb-$sw-7" "$work/swe.want"
      # A base port 0 (no EnhancedPort0) has no VL arbitration (IBA
      # 14.2.5.9), so smpquery does not ask for it.
      run "vlarb-$sw-0" smpquery -D vlarb "$sw" 0
      grep -q 'No VLArbitration tables (BSP0)' "$work/vlarb-$sw-0" || { cat "$work/vlarb-$sw-0" >&2; fail "VLArb of port 0"; }
      run "pi-$sw-2" smpquery -D portinfo "$sw" 2
      expect "$work/pi-$sw-2" OperVLs VL0-3
      expect "$work/pi-$sw-2" VLHighLimit 3
      run "pi-$sw-0" smpquery -D portinfo "$sw" 0
      expect "$work/pi-$sw-0" OperVLs VL0-1
    done
    run ca smpquery -D portinfo 0
    expect "$work/ca" OperVLs VL0-3
    expect "$work/ca" VLHighLimit 3
    sm_sweep
    run net ibnetdiscover
    leaf_b=$(lid_of leaf-b)
    [ -n "$leaf_b" ] || { cat "$work/net" >&2; fail "no LID for leaf-b"; }
    run sl2vl-lid smpquery sl2vl "$leaf_b" 1
    sl2vl_rows "$work/sl2vl-lid" 1 "$swe"
    run vlarb-lid smpquery vlarb "$leaf_b" 2
    vlarb_rows "$work/vlarb-lid" "$work/swe.want"
    echo "leaf-b (LID $leaf_b) port 1: $(grep -m1 'out  1:' "$work/sl2vl-lid")"
    # opensm with qos TRUE sends the switches its qos_swe_* tables by SMPs
    # (every input port of each output port), replacing the file's.
    printf '%s\n' 'qos TRUE' 'qos_swe_max_vls 8' 'qos_swe_vlarb_low 0:9,1:9' \
      'qos_swe_sl2vl 1,1,0,0,1,1,0,0,1,1,0,0,1,1,0,0' >"$work/opensm.conf"
    rc=0
    OSM_CACHE_DIR=$work timeout 60 opensm -o -F "$work/opensm.conf" -f "$work/opensm-qos.log" >"$work/opensm.out" 2>&1 || rc=$?
    [ $rc -eq 0 ] || { tail -50 "$work/opensm-qos.log" >&2; fail "opensm -o -F exited $rc"; }
    run sl2vl-sm smpquery sl2vl "$leaf_b" 1
    sl2vl_rows "$work/sl2vl-sm" 1 '| 1| 1| 0| 0| 1| 1| 0| 0| 1| 1| 0| 0| 1| 1| 0| 0|'
    run vlarb-sm smpquery vlarb "$leaf_b" 2
    grep -q '^WEIGHT: |0x9 |0x9 |' "$work/vlarb-sm" || { cat "$work/vlarb-sm" >&2; fail "opensm's VLArb is not on leaf-b port 2"; }
    # A value out of range is refused with its line.
    { printf '%s\n' '# softverbs: qos_swe_high_limit 2' '# softverbs: qos_sw0_max_vls 16'; cat "$work/fabric.net"; } >"$work/bad.net"
    rc=0
    SOFTVERBS_TOPOLOGY=$work/bad.net timeout 30 smpquery -D nodeinfo 0 >"$work/out" 2>&1 || rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/out" >&2; fail "a bad qos_sw0_max_vls was used"; }
    grep -q 'line 2: qos_sw0_max_vls is 1 to 15' "$work/out" || { cat "$work/out" >&2; fail "the error does not say why"; }
    ;;
  port-state)
    # The data path obeys the port's state (IBA 7.2): before opensm the
    # device's port is INIT and Debian's ibv_rc_pingpong (with a LID that
    # ibportstate gives it, as the tool refuses LID 0) sends nothing: its
    # client ends in a retry-exceeded error within a second or two. ibstat
    # (libibumad) and ibstatus (the sysfs tree, bind-mounted on
    # /sys/class in a mount namespace of its own) show INIT and
    # LID 0, then after opensm -o ACTIVE and the LID it gave, and
    # ibv_rc_pingpong passes.
    command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibv_rc_pingpong is not installed"; exit 77; }
    command -v ibstatus >/dev/null && command -v unshare >/dev/null || { echo "SKIP: ibstatus/unshare missing"; exit 77; }
    . "$(dirname "$0")/ports.sh"
    # ibstatus reads /sys/class/infiniband, which this host may lack: the
    # tree's class directory (beside the segment) goes over /sys/class.
    ibstatus_of() {
      unshare -m sh -c "mount --bind '$SOFTVERBS_DEVICE_PATH.sysfs/class' /sys/class &&
        exec timeout 10 ibstatus softverbs0:1" >"$work/$1" 2>&1 || { cat "$work/$1" >&2; fail "ibstatus ($1)"; }
    }
    pingpong() {  # NAME: a short ibv_rc_pingpong; the client's exit status
      local port rc=0 spid
      port=$(free_tcp_port 19200)
      timeout 30 ibv_rc_pingpong -d softverbs0 -p "$port" -n 5 >"$work/$1.server" 2>&1 &
      spid=$!
      for _ in $(seq 50); do
        rc=0
        timeout 30 ibv_rc_pingpong -d softverbs0 -p "$port" -n 5 localhost >"$work/$1.client" 2>&1 || rc=$?
        grep -q "Couldn't connect" "$work/$1.client" || break
        sleep 0.1
      done
      kill "$spid" 2>/dev/null || true
      wait "$spid" 2>/dev/null || true
      return $rc
    }
    run dev0 ibv_devinfo -d softverbs0  # libibverbs builds the sysfs tree
    run ibstat0 ibstat softverbs0 1
    grep -q 'State: Initializing' "$work/ibstat0" && grep -q 'Base lid: 0$' "$work/ibstat0" ||
      { cat "$work/ibstat0" >&2; fail "ibstat: not INIT with LID 0 before opensm"; }
    ibstatus_of ibstatus0
    grep -q 'state:.*2: INIT' "$work/ibstatus0" && grep -q 'base lid:.*0x0$' "$work/ibstatus0" ||
      { cat "$work/ibstatus0" >&2; fail "ibstatus: not INIT with LID 0 before opensm"; }
    run setlid ibportstate -D 0 1 lid 9
    start=$(date +%s%N)
    ! pingpong pp0 || { cat "$work/pp0.client" >&2; fail "ibv_rc_pingpong ran on an INIT port"; }
    elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    grep -qi 'retry.*exceeded\|RETRY_EXC' "$work/pp0.client" || { cat "$work/pp0.client" >&2; fail "no retry-exceeded error"; }
    [ "$elapsed_ms" -lt 10000 ] || fail "the INIT port's ibv_rc_pingpong took ${elapsed_ms} ms to fail"
    echo "before opensm: $(grep -m1 -i 'retry' "$work/pp0.client") (${elapsed_ms} ms)"
    run pc0 perfquery
    [ "$(field "$work/pc0" PortXmitDiscards)" -gt 0 ] || { cat "$work/pc0" >&2; fail "no PortXmitDiscards"; }
    # Each of them discarded because the port was not ACTIVE (IBA 16.1.4.3).
    run xmtdisc0 perfquery --xmtdisc
    expect "$work/xmtdisc0" PortInactiveDiscards "$(field "$work/pc0" PortXmitDiscards)"
    sm_sweep
    run dev1 ibv_devinfo -d softverbs0
    lid=$(awk '$1 == "port_lid:" { print $2 }' "$work/dev1")
    grep -q 'PORT_ACTIVE' "$work/dev1" && [ "${lid:-0}" -gt 0 ] || { cat "$work/dev1" >&2; fail "opensm left the port down"; }
    run ibstat1 ibstat softverbs0 1
    grep -q 'State: Active' "$work/ibstat1" && grep -q "Base lid: $lid\$" "$work/ibstat1" ||
      { cat "$work/ibstat1" >&2; fail "ibstat: not Active with LID $lid after opensm"; }
    ibstatus_of ibstatus1
    grep -q 'state:.*4: ACTIVE' "$work/ibstatus1" && grep -q "base lid:.*$(printf '0x%x' "$lid")\$" "$work/ibstatus1" ||
      { cat "$work/ibstatus1" >&2; fail "ibstatus: not ACTIVE with LID $lid after opensm"; }
    pingpong pp1 || { cat "$work/pp1.client" >&2; fail "ibv_rc_pingpong failed on the ACTIVE port"; }
    echo "after opensm (LID $lid): $(tail -n 1 "$work/pp1.client")"
    ;;
  sm-none)
    # No topology, SOFTVERBS_SM=none: the lone port waits for an SM. opensm
    # gives it a LID; with no neighbour it leaves it INIT (as a CA cabled
    # to nothing). A value other than none/builtin is refused.
    command -v opensm >/dev/null || { echo "SKIP: opensm is not installed"; exit 77; }
    unset SOFTVERBS_TOPOLOGY
    export SOFTVERBS_SM=none
    run dev0 ibv_devinfo
    grep -q 'PORT_INIT' "$work/dev0" && grep -q 'port_lid:[[:space:]]*0$' "$work/dev0" ||
      { cat "$work/dev0" >&2; fail "the port is not INIT with LID 0"; }
    rc=0
    OSM_CACHE_DIR=$work timeout 60 opensm -o ${osm_partitions:+-P "$osm_partitions"} -f "$work/opensm.log" >"$work/opensm.out" 2>&1 || rc=$?
    [ $rc -eq 0 ] || { tail -50 "$work/opensm.log" >&2; fail "opensm -o exited $rc"; }
    run dev1 ibv_devinfo
    grep -q 'port_lid:[[:space:]]*[1-9]' "$work/dev1" || { cat "$work/dev1" >&2; fail "opensm gave no LID"; }
    run pi smpquery -D portinfo 0
    [ "$(field "$work/pi" Lid)" = "$(awk '$1 == "port_lid:" { print $2 }' "$work/dev1")" ] ||
      { cat "$work/pi" "$work/dev1" >&2; fail "smpquery and ibv_devinfo disagree on the LID"; }
    rc=0
    SOFTVERBS_SM=bogus SOFTVERBS_DEVICE_PATH=$SOFTVERBS_DEVICE_PATH.bogus timeout 30 ibv_devinfo >"$work/bogus" 2>&1 || rc=$?
    [ $rc -ne 0 ] && grep -q "SOFTVERBS_SM: 'none'" "$work/bogus" || { cat "$work/bogus" >&2; fail "SOFTVERBS_SM=bogus was taken"; }
    ;;
  perfquery)
    # Before an SM no LID routes anywhere: another node's PMA is unreachable.
    rc=0
    timeout 30 perfquery -t 200 2 1 >"$work/pre" 2>&1 || rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/pre" >&2; fail "perfquery of LID 2 before an SM exited $rc"; }
    sm_sweep
    run net ibnetdiscover
    leaf_a=$(lid_of leaf-a); leaf_b=$(lid_of leaf-b); host2=$(lid_of host-2)
    [ -n "$leaf_a" ] && [ -n "$leaf_b" ] && [ -n "$host2" ] || { cat "$work/net" >&2; fail "no LIDs for leaf-a/leaf-b/host-2"; }
    # Every node's PMA answers: ClassPortInfo (perfquery prints its CapMask),
    # PortCounters of a switch port and of another CA's port; no traffic yet.
    run sw perfquery "$leaf_a" 1
    grep -q "Lid $leaf_a port 1 (CapMask: 0x300)" "$work/sw" || { cat "$work/sw" >&2; fail "leaf-a's PMA: no CapMask 0x300"; }
    expect "$work/sw" PortRcvPkts 0
    run ca perfquery "$host2" 2
    expect "$work/ca" PortSelect 2
    expect "$work/ca" PortXmitPkts 0
    # A port the node lacks: status 0x1C, so the tool fails at once, not after its timeout.
    start=$(date +%s%N)
    rc=0
    timeout 30 perfquery -t 3000 "$leaf_a" 9 >"$work/bad" 2>&1 || rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/bad" >&2; fail "perfquery of leaf-a port 9 exited $rc"; }
    [ $(( ($(date +%s%N) - start) / 1000000 )) -lt 2500 ] || fail "perfquery of leaf-a port 9 waited for its timeout"
    # Data: ib_write_bw on the device. Its port counts it, the facing switch
    # port (leaf-a port 1) counts the same traffic the other way round, the
    # other ports nothing.
    iters=300
    write_bw $iters
    run dev perfquery -x
    run facing perfquery -x "$leaf_a" 1
    [ "$(field "$work/dev" PortXmitPkts)" -ge $iters ] || { cat "$work/dev" >&2; fail "the device's port did not count the run"; }
    [ "$(field "$work/dev" PortXmitData)" -ge $(( iters * 1024 )) ] || { cat "$work/dev" >&2; fail "PortXmitData too small"; }
    for pair in PortXmitPkts:PortRcvPkts PortRcvPkts:PortXmitPkts PortXmitData:PortRcvData PortRcvData:PortXmitData; do
      [ "$(field "$work/dev" "${pair%:*}")" = "$(field "$work/facing" "${pair#*:}")" ] ||
        { cat "$work/dev" "$work/facing" >&2; fail "leaf-a port 1's ${pair#*:} is not the device's ${pair%:*}"; }
    done
    for where in "$leaf_a 2" "$leaf_a 7" "$leaf_b 7" "$host2 1"; do
      run quiet perfquery -x $where
      [ "$(field "$work/quiet" PortXmitData)" = 0 ] && [ "$(field "$work/quiet" PortRcvData)" = 0 ] ||
        { cat "$work/quiet" >&2; fail "port '$where' counted traffic that never crossed it"; }
    done
    # Issue 20: per VL, the facing port received what the device sent on
    # each VL (ib_write_bw's SL0, on VL0 by the device's SL2VL table), as
    # its PortRcvDataSL says per SL; no other VL.
    run facing-sl perfquery -S "$leaf_a" 1
    run facing-vlpkts perfquery --vloppackets "$leaf_a" 1
    run facing-vldata perfquery --vlopdata "$leaf_a" 1
    expect "$work/facing-vlpkts" PortVLOpPackets0 "$(field "$work/facing" PortRcvPkts)"
    expect "$work/facing-vldata" PortVLOpData0 "$(field "$work/facing-sl" RcvDataSL0)"
    for vl in 1 2 3 4 5 6 7; do
      expect "$work/facing-vlpkts" "PortVLOpPackets$vl" 0
      expect "$work/facing-vldata" "PortVLOpData$vl" 0
    done
    echo "leaf-a port 1: PortVLOpPackets0 $(field "$work/facing-vlpkts" PortVLOpPackets0), PortVLOpData0 $(field "$work/facing-vldata" PortVLOpData0), RcvDataSL0 $(field "$work/facing-sl" RcvDataSL0)"
    # All ports of the switch (PortSelect 0xFF): the facing port's share.
    run all perfquery -x -a "$leaf_a"
    [ "$(field "$work/all" PortRcvData)" = "$(field "$work/facing" PortRcvData)" ] || { cat "$work/all" >&2; fail "-a is not the ports' sum"; }
    # perfquery -R resets the switch port only; -r reads, then resets the device's.
    run reset perfquery -x -R "$leaf_a" 1
    run facing0 perfquery -x "$leaf_a" 1
    expect "$work/facing0" PortRcvPkts 0
    expect "$work/facing0" PortXmitData 0
    run dev1 perfquery -x -r
    [ "$(field "$work/dev1" PortXmitPkts)" = "$(field "$work/dev" PortXmitPkts)" ] || { cat "$work/dev1" >&2; fail "the switch's reset moved the device's counters"; }
    run dev0 perfquery -x
    expect "$work/dev0" PortXmitPkts 0
    ;;
  ibqueryerrors)
    # ibqueryerrors replaces the obsolete ibcheckerrors. --skip-sl: there is
    # no SA to ask for each destination's SL (README "Not yet").
    command -v ibqueryerrors >/dev/null || { echo "SKIP: ibqueryerrors is not installed"; exit 77; }
    sm_sweep
    write_bw 200
    run clean ibqueryerrors --skip-sl
    grep -q 'Errors for' "$work/clean" && { cat "$work/clean" >&2; fail "errors reported without faults"; }
    grep -q '6 nodes checked, 0 bad nodes found' "$work/clean" || { cat "$work/clean" >&2; fail "not 6 clean nodes"; }
    # --details asks every port's PMA for PortRcvErrorDetails and
    # PortXmitDiscardDetails too: answered, so it runs clean (run: exit 0).
    run clean-details ibqueryerrors --skip-sl --details
    grep -q 'Errors for' "$work/clean-details" && { cat "$work/clean-details" >&2; fail "--details: errors reported without faults"; }
    grep -q '6 nodes checked, 0 bad nodes found' "$work/clean-details" || { cat "$work/clean-details" >&2; fail "--details: not 6 clean nodes"; }
    run rcverr0 perfquery --rcverr
    expect "$work/rcverr0" PortLocalPhysicalErrors 0
    # Drops and corruption during a data run (the requester's retries carry it through).
    SOFTVERBS_FAULTS=loss=0.05,corrupt=0.05,seed=11 write_bw 300
    # The corrupted packets failed their ICRC where they were received: the
    # device port's local physical errors, all of its PortRcvErrors with
    # the malformed ones (src/mad/pma_counters.cc). The drops never left the
    # sender and fit no discard detail (PortInactiveDiscards stays 0).
    run pc perfquery
    run rcverr perfquery --rcverr
    run xmtdisc perfquery --xmtdisc
    cat "$work/rcverr" "$work/xmtdisc"
    phys=$(field "$work/rcverr" PortLocalPhysicalErrors)
    [ "${phys:-0}" -gt 0 ] || { cat "$work/rcverr" >&2; fail "perfquery --rcverr: no local physical errors"; }
    [ $(( phys + $(field "$work/rcverr" PortMalformedPktErrors) )) = "$(field "$work/pc" PortRcvErrors)" ] ||
      { cat "$work/pc" "$work/rcverr" >&2; fail "the receive error details do not add up to PortRcvErrors"; }
    expect "$work/xmtdisc" PortInactiveDiscards 0
    # The facing switch port counted none of it.
    run net ibnetdiscover
    run rcverr-facing perfquery --rcverr "$(lid_of leaf-a)" 1
    expect "$work/rcverr-facing" PortLocalPhysicalErrors 0
    rc=0
    timeout 30 ibqueryerrors --skip-sl -r >"$work/bad" 2>&1 || rc=$?
    [ $rc -ne 124 ] || fail "ibqueryerrors timed out"
    cat "$work/bad"
    [ "$(grep -c '^Errors for' "$work/bad")" = 1 ] || { cat "$work/bad" >&2; fail "not exactly one node with errors"; }
    grep -q '^Errors for ".*softverbs0"' "$work/bad" || fail "the node with errors is not the device's"
    grep -q 'port 1: .*\[SymbolErrorCounter == [1-9][0-9]*\].*\[PortRcvErrors == [1-9][0-9]*\].*\[PortXmitDiscards == [1-9][0-9]*\]' "$work/bad" ||
      fail "the device's port does not show the injected faults"
    grep -q 'Link info: .*==>.* "leaf-a"' "$work/bad" || fail "the link is not the device's, to leaf-a"
    grep -q '1 bad nodes found' "$work/bad" && grep -q '1 ports have errors beyond threshold' "$work/bad" ||
      fail "more than the device's link reported"
    # -r reset PortCounters only; a Set of the details (perfquery -R) resets them.
    run rcverr1 perfquery --rcverr
    [ "$(field "$work/rcverr1" PortLocalPhysicalErrors)" = "$phys" ] || { cat "$work/rcverr1" >&2; fail "the details moved"; }
    run rcverr-reset perfquery --rcverr -R
    run rcverr2 perfquery --rcverr
    expect "$work/rcverr2" PortLocalPhysicalErrors 0
    ;;
  sa)
    command -v opensm >/dev/null || { echo "SKIP: opensm is not installed"; exit 77; }
    command -v saquery >/dev/null || { echo "SKIP: saquery is not installed"; exit 77; }
    # No SM yet: the port knows no SM LID, and saquery gives up at once.
    rc=0
    timeout 30 saquery -t 200 >"$work/nosm" 2>&1 || rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/nosm" >&2; fail "saquery without an SM exited $rc"; }
    # opensm stays up (no -o): its SA and SMI agents are MADs' destinations
    # in its own process.
    sm_start
    sm_guid=$(awk '/Using default GUID/ { print $NF; exit }' "$work/opensm.out")
    [ -n "$sm_guid" ] || { cat "$work/opensm.out" >&2; fail "opensm did not say its GUID"; }
    # SMInfo to the port goes to opensm's SMI agent, which answers MASTER.
    run sm sminfo
    grep -q "sm guid $sm_guid, .* SMINFO_MASTER" "$work/sm" || { cat "$work/sm" >&2; fail "sminfo does not name opensm ($sm_guid) master"; }
    sm_lid=$(awk '{ print $4; exit }' "$work/sm")
    run local smpquery portinfo "$sm_lid"
    expect "$work/local" SMLid "$sm_lid"
    expect "$work/local" Lid "$sm_lid"
    # Every node record: 56 + 6 x 112 bytes, one whole RMPP message.
    run nr saquery
    [ "$(grep -c '^NodeRecord dump' "$work/nr")" = 6 ] || { cat "$work/nr" >&2; fail "saquery: not 6 node records"; }
    for name in host-1 host-2 host-3 leaf-a leaf-b; do
      grep -q "NodeDescription\.*$name\$" "$work/nr" || { cat "$work/nr" >&2; fail "saquery: no node record of $name"; }
    done
    # A path between every pair of the six LIDs, every link end, the
    # broadcast group opensm made, and its own SMInfoRecord.
    run pr saquery PR
    [ "$(grep -c '^PathRecord dump' "$work/pr")" = 36 ] || { cat "$work/pr" >&2; fail "saquery PR: not 36 path records"; }
    host2=$(awk '/NodeDescription\.*host-2$/ { print lid; exit } /lid\.\.\./ { lid = $1; sub(/.*\./, "", lid) }' "$work/nr")
    run pr1 saquery --src-to-dst "$sm_lid:$host2"
    [ "$(grep -c '^PathRecord dump' "$work/pr1")" = 1 ] && grep -q "dlid\.*$host2\$" "$work/pr1" ||
      { cat "$work/pr1" >&2; fail "saquery --src-to-dst $sm_lid:$host2: not the one path"; }
    run lr saquery LR
    [ "$(grep -c '^LinkRecord dump' "$work/lr")" = 12 ] || { cat "$work/lr" >&2; fail "saquery LR: not 12 link records"; }
    run mc saquery -g
    grep -q 'MGID\.*ff12:401b:ffff::ffff:ffff' "$work/mc" || { cat "$work/mc" >&2; fail "saquery -g: no IPoIB broadcast group"; }
    run smir saquery SMIR
    grep -q "GUID\.*$(printf '0x%016x' "$sm_guid")" "$work/smir" && grep -q 'SMState\.*3' "$work/smir" ||
      { cat "$work/smir" >&2; fail "saquery SMIR: not opensm, master"; }
    # A registrant that dies leaves nobody to answer: the tools time out
    # promptly (nothing waits on the dead process).
    kill -KILL "$sm_pid"
    wait "$sm_pid" 2>/dev/null || true
    sm_pid=
    start=$(date +%s%N)
    rc=0
    timeout 30 saquery -t 200 >"$work/gone" 2>&1 || rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/gone" >&2; fail "saquery after opensm died exited $rc"; }
    grep -qi 'timed out' "$work/gone" || { cat "$work/gone" >&2; fail "saquery did not time out"; }
    [ $(( ($(date +%s%N) - start) / 1000000 )) -lt 5000 ] || fail "saquery took more than 5 s to time out"
    rc=0
    timeout 30 sminfo -t 200 >"$work/gone-sm" 2>&1 || rc=$?
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$work/gone-sm" >&2; fail "sminfo found an SM after opensm died"; }
    ;;
  issm)
    # The port's IsSM bit while opensm holds the issm file that
    # umad_get_issm_path names (as it opens /dev/infiniband/issmN on
    # hardware); the SA's SM port records (PortInfoRecords with IsSM) list
    # its port; killed, its file goes and the bit with it.
    command -v saquery >/dev/null || { echo "SKIP: saquery is not installed"; exit 77; }
    has_issm() { awk '/^CapMask:/ { on = 1; next } on && /^[A-Za-z]/ { on = 0 } on && $1 == "IsSM" { f = 1 } END { exit !f }' "$1"; }
    run pi0 smpquery -D portinfo 0
    ! has_issm "$work/pi0" || { cat "$work/pi0" >&2; fail "IsSM before any SM"; }
    sm_start
    run sm sminfo
    sm_lid=$(awk '{ print $4; exit }' "$work/sm")
    run pi1 smpquery portinfo "$sm_lid"
    has_issm "$work/pi1" || { cat "$work/pi1" >&2; fail "no IsSM on opensm's port (LID $sm_lid)"; }
    grep -m1 -A3 '^CapMask' "$work/pi1"
    run ibstat1 ibstat softverbs0 1
    cap=$(awk '/Capability mask:/ { print $3 }' "$work/ibstat1")
    [ $(( cap & 2 )) -ne 0 ] || { cat "$work/ibstat1" >&2; fail "ibstat: no IsSM in the capability mask ($cap)"; }
    run smports saquery -s
    cat "$work/smports"
    [ "$(grep -c '^PortInfoRecord dump' "$work/smports")" = 1 ] || { cat "$work/smports" >&2; fail "saquery -s: not one SM port"; }
    [ "$(( $(awk -F'[.]+' '/EndPortLid/ { print $2; exit }' "$work/smports") + 0 ))" = "$sm_lid" ] ||
      { cat "$work/smports" >&2; fail "saquery -s: not opensm's LID $sm_lid"; }
    kill -KILL "$sm_pid"
    wait "$sm_pid" 2>/dev/null || true
    sm_pid=
    run pi2 smpquery portinfo "$sm_lid"
    ! has_issm "$work/pi2" || { cat "$work/pi2" >&2; fail "IsSM after opensm was killed"; }
    run ibstat2 ibstat softverbs0 1
    cap=$(awk '/Capability mask:/ { print $3 }' "$work/ibstat2")
    [ $(( cap & 2 )) -eq 0 ] || { cat "$work/ibstat2" >&2; fail "ibstat: IsSM after opensm was killed ($cap)"; }
    ;;
  mcast-sm)
    command -v saquery >/dev/null || { echo "SKIP: saquery is not installed"; exit 77; }
    sm_start
    # ib_send_bw -g: the server's QP is attached to the group the SA made,
    # the client sends to its MLID. -n within the receive queue's depth: no
    # UD datagram can find the queue empty.
    perf_pair bw ib_send_bw -g -n 400
    grep -q 'remote address: LID 0x[cdef][0-9a-f][0-9a-f][0-9a-f] QPN 0xffffff' "$work/bw.client" ||
      { cat "$work/bw.client" >&2; fail "ib_send_bw -g: the client did not send to a multicast LID"; }
    awk '$1 == 4096 && $2 == 400 { ok = 1 } END { exit !ok }' "$work/bw.server" ||
      { cat "$work/bw.server" >&2; fail "ib_send_bw -g: the server did not receive its 400 messages"; }
    # ib_send_lat -g: each side in its own group, sending to the other's;
    # for 4 s, while saquery -g finds both groups at the SA.
    command -v ib_send_lat >/dev/null || { echo "SKIP: perftest is not installed"; exit 77; }
    (
      for _ in $(seq 40); do
        sleep 0.2
        timeout 10 saquery -g >"$work/mc" 2>&1 || continue
        if grep -q 'MGID\.*ff01:0:2:c985::$' "$work/mc" && grep -q 'MGID\.*ff01:0:2:c985::1$' "$work/mc"; then
          touch "$work/seen"
          break
        fi
      done
    ) &
    poller=$!
    perf_pair lat ib_send_lat -g -D 4
    wait "$poller" || true
    poller=
    [ -e "$work/seen" ] || { cat "$work/mc" >&2; fail "saquery -g never showed perftest's two groups"; }
    grep -B1 -A1 'c985' "$work/mc"
    awk '$1 == 2 && $2 > 0 { ok = 1 } END { exit !ok }' "$work/lat.client" ||
      { cat "$work/lat.client" >&2; fail "ib_send_lat -g: no round trips"; }
    tail -n 2 "$work/lat.client" | head -n 1
    # Both processes left (the second leave is the port's last): the SA
    # holds no perftest group any more.
    run after saquery -g
    ! grep -q 'c985' "$work/after" || { cat "$work/after" >&2; fail "a perftest group outlived its members"; }
    grep -c 'Mcast group deleted' "$work/opensm.log" | grep -qx 3 ||
      { grep -i mcast "$work/opensm.log" >&2; fail "opensm did not delete the three groups perftest made"; }
    ;;
  sm-tools)
    command -v ibqueryerrors >/dev/null && command -v ibping >/dev/null ||
      { echo "SKIP: infiniband-diags is not installed"; exit 77; }
    sm_start
    write_bw 200
    run clean ibqueryerrors
    grep -q 'Errors for' "$work/clean" && { cat "$work/clean" >&2; fail "errors reported without faults"; }
    grep -q '6 nodes checked, 0 bad nodes found' "$work/clean" || { cat "$work/clean" >&2; fail "not 6 clean nodes"; }
    SOFTVERBS_FAULTS=loss=0.05,corrupt=0.05,seed=11 write_bw 300
    rc=0
    timeout 30 ibqueryerrors -r >"$work/bad" 2>&1 || rc=$?  # exits non-zero when it finds errors
    [ $rc -ne 124 ] || fail "ibqueryerrors timed out"
    [ "$(grep -c '^Errors for' "$work/bad")" = 1 ] || { cat "$work/bad" >&2; fail "not exactly one node with errors"; }
    grep -q '^Errors for ".*softverbs0"' "$work/bad" || { cat "$work/bad" >&2; fail "the node with errors is not the device's"; }
    grep -q 'Link info: .*==>.* "leaf-a"' "$work/bad" || { cat "$work/bad" >&2; fail "the link is not the device's, to leaf-a"; }
    # ibping: a server registers the vendor ping class in its process; the
    # client reaches it by LID and by port GUID (resolved through the SA).
    run pi smpquery portinfo -D 0
    lid=$(field "$work/pi" Lid)
    run ni smpquery nodeinfo -D 0
    guid=$(field "$work/ni" PortGuid)
    timeout 60 ibping -S >"$work/ping.server" 2>&1 &
    server=$!
    # Until its agent is registered a ping is lost: wait for a first pong.
    for _ in $(seq 50); do
      timeout 10 ibping -c 1 -t 100 -L "$lid" 2>/dev/null | grep -q ', 1 received' && break
      kill -0 "$server" 2>/dev/null || { cat "$work/ping.server" >&2; fail "ibping -S exited"; }
    done
    run ping-lid ibping -c 3 -L "$lid"
    grep -q '3 packets transmitted, 3 received, 0% packet loss' "$work/ping-lid" || { cat "$work/ping-lid" >&2; fail "ibping -L $lid lost pings"; }
    run ping-guid ibping -c 2 -G "$guid"
    grep -q '2 packets transmitted, 2 received, 0% packet loss' "$work/ping-guid" || { cat "$work/ping-guid" >&2; fail "ibping -G $guid lost pings"; }
    tail -n 1 "$work/ping-lid"
    kill -TERM "$server"; wait "$server" 2>/dev/null || true; server=
    # With the server gone the ping is lost (the test can fail).
    rc=0
    timeout 30 ibping -c 1 -t 200 -L "$lid" >"$work/ping-gone" 2>&1 || rc=$?
    grep -q '1 packets transmitted, 0 received' "$work/ping-gone" || { cat "$work/ping-gone" >&2; fail "a ping was answered with no server"; }
    if command -v ibsysstat >/dev/null; then
      timeout 60 ibsysstat -S >"$work/sysstat.server" 2>&1 &
      server=$!
      for _ in $(seq 50); do
        timeout 10 ibsysstat -t 100 "$lid" 2>/dev/null | grep -q 'succeeded' && break
        kill -0 "$server" 2>/dev/null || { cat "$work/sysstat.server" >&2; fail "ibsysstat -S exited"; }
      done
      run sysstat ibsysstat "$lid"
      grep -q 'sysstat ping succeeded' "$work/sysstat" || { cat "$work/sysstat" >&2; fail "ibsysstat got no answer"; }
      run sysstat-host ibsysstat "$lid" host
      [ "$(cat "$work/sysstat-host")" = "$(cat /proc/sys/kernel/hostname).$(cat /proc/sys/kernel/domainname)" ] ||
        { cat "$work/sysstat-host" >&2; fail "ibsysstat host: not this host's name"; }
      kill -TERM "$server"; wait "$server" 2>/dev/null || true; server=
    fi
    ;;
  traps)
    command -v ibportstate >/dev/null && command -v iblinkinfo >/dev/null ||
      { echo "SKIP: infiniband-diags is not installed"; exit 77; }
    # No periodic sweep: a heavy sweep after SUBNET UP can only come from a
    # trap. -D 0x07 logs errors, info and verbose lines (the trap itself is
    # logged as an error, the sweep it forces as verbose).
    sm_start -s 0 -D 0x07
    run net ibnetdiscover
    leafb=$(lid_of leaf-b)
    [ -n "$leafb" ] && [ "$leafb" -gt 0 ] || { cat "$work/net" >&2; fail "leaf-b has no LID"; }
    # sm_log_wait N PATTERN: until opensm's log has N lines matching PATTERN (10 s).
    sm_log_wait() {
      for _ in $(seq 50); do
        [ "$(grep -c -- "$2" "$work/opensm.log")" -ge "$1" ] && return 0
        kill -0 "$sm_pid" 2>/dev/null || fail "opensm exited"
        sleep 0.2
      done
      tail -40 "$work/opensm.log" >&2
      fail "opensm's log: fewer than $1 lines of '$2' in 10 s"
    }
    notice="Received Generic Notice type:1 num:128 (Link state change) Producer:2 (Switch) from LID:$leafb "
    grep -q -- "num:128" "$work/opensm.log" && fail "a trap 128 before any link changed"
    sweeps=$(grep -c "HEAVY SWEEP COMPLETE" "$work/opensm.log" || true)
    run disable ibportstate "$leafb" 1 disable
    sm_log_wait 1 "$notice"
    sm_log_wait 1 "Forcing heavy sweep. Received trap:128"
    sm_log_wait $((sweeps + 1)) "HEAVY SWEEP COMPLETE"
    grep -m1 -- "$notice" "$work/opensm.log"
    # Sent once, not repeated (src/mad/notice.h): one notice per change.
    [ "$(grep -c -- "num:128" "$work/opensm.log")" = 1 ] || { grep -- "num:128" "$work/opensm.log" >&2; fail "not one trap 128"; }
    run links iblinkinfo
    awk '/^Switch: .*leaf-b/ { s = 1; next } /^Switch: / { s = 0 } s && $2 ~ /^1\[/' "$work/links" >"$work/leafb1"
    grep -q 'Down/ *Disabled' "$work/leafb1" || { cat "$work/links" >&2; fail "iblinkinfo: leaf-b port 1 is not Down/Disabled"; }
    cat "$work/leafb1"
    # Enabled again: another trap, another sweep, and opensm brings the link up.
    run enable ibportstate "$leafb" 1 enable
    sm_log_wait 2 "$notice"
    sm_log_wait $((sweeps + 2)) "HEAVY SWEEP COMPLETE"
    for _ in $(seq 50); do
      run links iblinkinfo
      awk '/^Switch: .*leaf-b/ { s = 1; next } /^Switch: / { s = 0 } s && $2 ~ /^1\[/' "$work/links" >"$work/leafb1"
      grep -q 'Active/ *LinkUp' "$work/leafb1" && break
      sleep 0.2
    done
    grep -q 'Active/ *LinkUp' "$work/leafb1" || { cat "$work/links" >&2; fail "iblinkinfo: leaf-b port 1 did not come back Active"; }
    # Trap 257 (Bad P_Key): a GMP from the device's port to its own PMA with
    # the key at index 5 (opensm filled index 0 only: the invalid key) is
    # dropped by QP1, and opensm hears of it; index 0 is answered.
    gmp=$lib/../bin/softverbs_bad_pkey_gmp
    grep -q -- "num:257" "$work/opensm.log" && fail "a trap 257 before any bad P_Key"
    "$gmp" 0 || fail "a GMP with the default P_Key was not answered"
    rc=0; "$gmp" 5 || rc=$?
    [ "$rc" = 3 ] || fail "a GMP with the invalid P_Key: exit $rc, not dropped"
    sm_log_wait 1 "Received Generic Notice type:2 num:257 "
    grep -m1 -- "num:257" "$work/opensm.log"
    grep -m1 -- "Bad P_Key:0x0 " "$work/opensm.log" || true
    ;;
  multi-ca)
    # The topology's other CAs are devices (src/mad/ca_devices.h: softverbs1
    # host-1 on leaf-a, softverbs2 host-2 on leaf-b, softverbs3 host-3,
    # whose port 1 has no link), and data between them goes only where the
    # subnet carries it (src/mad/data_route.h). Before opensm (ports INIT,
    # forwarding tables empty; the LIDs ibportstate gives them, as
    # ibv_rc_pingpong refuses LID 0) Debian's ibv_rc_pingpong between
    # softverbs1 and softverbs2 ends in a retry-exceeded error; after
    # opensm -o it passes, by LID and by GID (and ibv_ud_pingpong with a
    # GRH), softverbs2's contexts get its port's events (ibv_asyncwatch),
    # ibstat describes the CAs (perfquery cannot open softverbs1: MADs
    # leave from softverbs0 alone), and opensm's partitions give softverbs2
    # alone Blue's P_Key (read
    # by tests/conformance/pkey_tables.cc); once ibportstate disables the
    # leaf-a port ibtracert shows on their route it fails again, while
    # softverbs0 and softverbs1 (both on leaf-a) still pass. Each server is
    # killed by PID.
    command -v ibv_rc_pingpong >/dev/null && command -v ibv_devices >/dev/null ||
      { echo "SKIP: ibverbs-utils is not installed"; exit 77; }
    command -v ibportstate >/dev/null && command -v ibtracert >/dev/null ||
      { echo "SKIP: infiniband-diags is not installed"; exit 77; }
    . "$(dirname "$0")/ports.sh"
    run devs ibv_devices
    for d in softverbs0 softverbs1 softverbs2 softverbs3; do
      grep -q "^[[:space:]]*$d[[:space:]]" "$work/devs" || { cat "$work/devs" >&2; fail "ibv_devices does not list $d"; }
    done
    [ "$(grep -c 'softverbs' "$work/devs")" = 4 ] || { cat "$work/devs" >&2; fail "ibv_devices: not 4 devices"; }
    grep -q 'softverbs2[[:space:]]*0011750000000300' "$work/devs" || { cat "$work/devs" >&2; fail "softverbs2 is not host-2"; }
    run di0 ibv_devinfo -d softverbs2
    grep -q 'PORT_INIT' "$work/di0" && grep -q 'port_lid:[[:space:]]*0$' "$work/di0" ||
      { cat "$work/di0" >&2; fail "softverbs2 is not INIT with LID 0 before opensm"; }
    run di3 ibv_devinfo -d softverbs3
    grep -q 'PORT_DOWN' "$work/di3" || { cat "$work/di3" >&2; fail "softverbs3 (port 1 unlinked) is not DOWN"; }
    run setlid1 ibportstate -D 0,1,2 1 lid 20
    run setlid2 ibportstate -D 0,1,7,1 1 lid 21
    must_fail pp0 softverbs1 softverbs2
    # A partition of host-2's port alone (its port GUID: its node GUID + 1):
    # softverbs2 alone reads 0x8001 from its CA's table in the subnet.
    printf 'Default=0x7fff : ALL=full ;\nBlue=0x0001 : 0x0011750000000301=full ;\n' >"$work/partitions.conf"
    # ibv_asyncwatch on softverbs2 hears its own port's events from opensm's Sets.
    # Its own PID, not a timeout's (a KILLed timeout leaves its child running);
    # cleanup kills it if the test ends early.
    # So does softverbs0 on the device's own port.
    ibv_asyncwatch -d softverbs2 >"$work/watch2" 2>&1 &
    poller=$!
    ibv_asyncwatch -d softverbs0 >"$work/watch0" 2>&1 &
    poller0=$!
    for _ in $(seq 50); do grep -q 'async event FD' "$work/watch2" && grep -q 'async event FD' "$work/watch0" && break; sleep 0.1; done
    osm_partitions=$work/partitions.conf sm_sweep
    for _ in $(seq 50); do grep -q 'IBV_EVENT_PORT_ACTIVE' "$work/watch2" && grep -q 'IBV_EVENT_PORT_ACTIVE' "$work/watch0" && break; sleep 0.1; done
    kill -KILL "$poller" "$poller0" 2>/dev/null || true
    wait "$poller" "$poller0" 2>/dev/null || true
    poller= poller0=
    # CLIENT_REREGISTER: opensm asks for it in its first sweep of a port that
    # supports it (IsClientReregistrationSupported), on every CA.
    for e in PORT_ACTIVE SM_CHANGE PKEY_CHANGE CLIENT_REREGISTER; do  # its LID stays the one ibportstate gave
      grep -q "IBV_EVENT_$e (.*), port 1" "$work/watch2" || { cat "$work/watch2" >&2; fail "softverbs2 did not get IBV_EVENT_$e"; }
    done
    for e in PORT_ACTIVE CLIENT_REREGISTER; do
      grep -q "IBV_EVENT_$e (.*), port 1" "$work/watch0" || { cat "$work/watch0" >&2; fail "softverbs0 did not get IBV_EVENT_$e"; }
    done
    pkey_tool=$lib/../bin/softverbs_pkey_tables
    run pkeys "$pkey_tool"
    grep -q '^softverbs2 [0-9]* 0x8001$' "$work/pkeys" && grep -q '^softverbs1 0 0xffff$' "$work/pkeys" &&
      ! grep -q '^softverbs[013] .* 0x8001$' "$work/pkeys" || { cat "$work/pkeys" >&2; fail "P_Keys: Blue is not softverbs2's alone"; }
    run net ibnetdiscover
    lid1=$(lid_of host-1)
    lid2=$(lid_of host-2)
    [ "${lid1:-0}" -gt 0 ] && [ "${lid2:-0}" -gt 0 ] || { cat "$work/net" >&2; fail "opensm gave host-1/host-2 no LID"; }
    run di1 ibv_devinfo -d softverbs2
    grep -q 'PORT_ACTIVE' "$work/di1" && grep -q "port_lid:[[:space:]]*$lid2\$" "$work/di1" ||
      { cat "$work/di1" >&2; fail "softverbs2 is not ACTIVE with LID $lid2"; }
    # libibumad describes the same CAs (ibstat), but opens only softverbs0's
    # port for MADs: the subnet is managed from there.
    run cas ibstat -l
    [ "$(tr '\n' ' ' <"$work/cas")" = "softverbs0 softverbs1 softverbs2 softverbs3 " ] ||
      { cat "$work/cas" >&2; fail "ibstat -l does not list the 4 CAs"; }
    # ... and so does the sysfs tree beside the segment, which ibstatus reads.
    ports2=$SOFTVERBS_DEVICE_PATH.sysfs/class/infiniband/softverbs2/ports/1
    [ "$(cat "$ports2/state")" = "4: ACTIVE" ] && [ "$(cat "$ports2/lid")" = "$(printf '0x%x' "$lid2")" ] &&
      grep -q '0011:7500:0000:0301$' "$ports2/gids/0" || fail "sysfs softverbs2: $(cat "$ports2/state" "$ports2/lid")"
    run st2 ibstat softverbs2
    grep -q 'State: Active' "$work/st2" && grep -q "Base lid: $lid2\$" "$work/st2" &&
      grep -q 'Port GUID: 0x0011750000000301' "$work/st2" || { cat "$work/st2" >&2; fail "ibstat softverbs2"; }
    ! timeout 10 perfquery -C softverbs1 >"$work/pq1" 2>&1 && grep -q "can't open UMAD port" "$work/pq1" ||
      { cat "$work/pq1" >&2; fail "perfquery -C softverbs1 did not fail to open the port"; }
    # The leaf-a port their route leaves by: ibtracert's line after the one
    # that reaches leaf-a starts with it ("[7] -> switch port ... leaf-b").
    run tr ibtracert "$lid1" "$lid2"
    cat "$work/tr"
    hop=$(awk 'at_a && match($0, /^\[[0-9]+\]/) { print substr($0, 2, RLENGTH - 2); exit } { at_a = /"leaf-a"/ }' "$work/tr")
    leafa=$(lid_of leaf-a)
    leafb=$(lid_of leaf-b)
    run di0l ibv_devinfo -d softverbs0
    lid0=$(awk '/port_lid:/ { print $2; exit }' "$work/di0l")
    [ "${hop:-0}" -ge 7 ] && [ -n "$leafa" ] && [ -n "$leafb" ] || fail "ibtracert: no hop from leaf-a to leaf-b"
    [ "${lid0:-0}" -gt 0 ] || { cat "$work/di0l" >&2; fail "softverbs0 has no LID"; }
    # Their traffic is counted by every port on that route (perfquery: the
    # subnet's PMA, src/mad/subnet_pma.cc), and not by softverbs0's port nor
    # the leaf-a port facing it, which it does not cross.
    counter() {  # LID PORT FIELD
      run pq perfquery "$1" "$2"
      field "$work/pq" "$3"
    }
    watched=("$lid1 1 PortXmitPkts" "$leafa 2 PortRcvPkts" "$leafa $hop PortXmitPkts" "$leafb $hop PortRcvPkts"
      "$leafb 1 PortXmitPkts" "$lid2 1 PortRcvPkts")
    unwatched=("$lid0 1 PortXmitPkts" "$lid0 1 PortRcvPkts" "$leafa 1 PortXmitPkts" "$leafa 1 PortRcvPkts")
    declare -A before
    for w in "${watched[@]}" "${unwatched[@]}"; do before[$w]=$(counter $w); done
    must_pass pp1 softverbs1 softverbs2
    for w in "${watched[@]}"; do
      now=$(counter $w)
      [ "$((now - ${before[$w]}))" -ge 5 ] || fail "perfquery $w: ${before[$w]} -> $now, not 5 messages more"
      echo "on the route: perfquery $w ${before[$w]} -> $now"
    done
    for w in "${unwatched[@]}"; do
      now=$(counter $w)
      [ "$now" = "${before[$w]}" ] || fail "perfquery $w (off the route): ${before[$w]} -> $now"
    done
    must_pass pp1g softverbs1 softverbs2 -g 0
    must_pass pp1d softverbs0 softverbs2
    pp_tool=ibv_ud_pingpong must_pass pp1u softverbs1 softverbs2 -g 0
    run disable ibportstate "$leafa" "$hop" disable
    # softverbs1 the client: its first SEND takes the route ibtracert showed
    # (the way back may take the other link, and a pingpong client waits
    # for its answers without a timer of its own).
    must_fail pp2 softverbs2 softverbs1
    must_pass pp3 softverbs0 softverbs1
    ;;
  route-sl)
    # The other CAs' traffic per SL and VL on each port of its route
    # (src/mad/data_route.h): the switches' SL2VL tables from the file
    # (qos_swe_sl2vl: SL 1 on VL 2, SL 15 on VL15; opensm -o without qos
    # keeps them) choose the VL of each link out of a switch, the sending
    # CA's table (the default: SL 1 on VL 1) the first. ibv_rc_pingpong -l 1
    # between softverbs1 and softverbs2 then shows in perfquery -X/-S and
    # --vloppackets on the switch ports; with -l 15 the first switch port
    # drops it (PortXmitDiscards) and RC ends in retry-exceeded.
    command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils is not installed"; exit 77; }
    command -v ibtracert >/dev/null || { echo "SKIP: infiniband-diags is not installed"; exit 77; }
    . "$(dirname "$0")/ports.sh"
    { echo '# softverbs: qos_swe_sl2vl 3,2,1,0,3,2,1,0,3,2,1,0,3,2,1,15'; cat "$work/fabric.net"; } >"$work/slvl.net"
    export SOFTVERBS_TOPOLOGY=$work/slvl.net
    sm_sweep
    run net ibnetdiscover
    lid1=$(lid_of host-1)
    lid2=$(lid_of host-2)
    leafa=$(lid_of leaf-a)
    leafb=$(lid_of leaf-b)
    [ -n "$lid1" ] && [ -n "$lid2" ] && [ -n "$leafa" ] && [ -n "$leafb" ] || { cat "$work/net" >&2; fail "no LIDs"; }
    # out_port FROM_LID TO_LID SWITCH: the port ibtracert's route leaves SWITCH by.
    out_port() {
      run tr ibtracert "$1" "$2"
      awk -v sw="\"$3\"" 'at && match($0, /^\[[0-9]+\]/) { print substr($0, 2, RLENGTH - 2); exit } { at = index($0, sw) > 0 }' "$work/tr"
    }
    hop=$(out_port "$lid1" "$lid2" leaf-a)
    back=$(out_port "$lid2" "$lid1" leaf-b)
    [ "${hop:-0}" -ge 7 ] && [ "${back:-0}" -ge 7 ] || { cat "$work/tr" >&2; fail "ibtracert: no inter-switch hop"; }
    must_pass sl1 softverbs1 softverbs2 -l 1
    # host-1 -> host-2: into leaf-a port 2 on VL 1, across to leaf-b on VL 2.
    run a2 perfquery --vloppackets "$leafa" 2
    run a2sl perfquery -S "$leafa" 2
    run bhop perfquery --vloppackets "$leafb" "$hop"
    run b1sl perfquery -X "$leafb" 1
    [ "$(field "$work/a2" PortVLOpPackets1)" -ge 5 ] || { cat "$work/a2" >&2; fail "leaf-a port 2 received nothing on VL 1"; }
    [ "$(field "$work/a2sl" RcvDataSL1)" -gt 0 ] || { cat "$work/a2sl" >&2; fail "leaf-a port 2: no RcvDataSL1"; }
    [ "$(field "$work/bhop" PortVLOpPackets2)" -ge 5 ] || { cat "$work/bhop" >&2; fail "leaf-b port $hop received nothing on VL 2"; }
    for vl in 0 1 3 4 5 6 7; do expect "$work/bhop" "PortVLOpPackets$vl" 0; done
    [ "$(field "$work/b1sl" XmtDataSL1)" -gt 0 ] && [ "$(field "$work/b1sl" XmtDataSL0)" = 0 ] ||
      { cat "$work/b1sl" >&2; fail "leaf-b port 1: XmtDataSL1 not counted alone"; }
    echo "SL 1: leaf-a port 2 VL1 $(field "$work/a2" PortVLOpPackets1) packets; leaf-b port $hop VL2 $(field "$work/bhop" PortVLOpPackets2); leaf-b port 1 XmtDataSL1 $(field "$work/b1sl" XmtDataSL1)"
    run d0 perfquery "$leafb" "$back"
    before=$(field "$work/d0" PortXmitDiscards)
    # host-2 sends first: leaf-b's port toward leaf-a maps SL 15 to VL15.
    must_fail sl15 softverbs1 softverbs2 -l 15
    run d1 perfquery "$leafb" "$back"
    [ "$(field "$work/d1" PortXmitDiscards)" -gt "$before" ] ||
      { cat "$work/d1" >&2; fail "leaf-b port $back did not count the SL 15 discards"; }
    echo "SL 15: leaf-b port $back PortXmitDiscards $before -> $(field "$work/d1" PortXmitDiscards)"
    ;;
  mcast-route)
    # IBA 18.2.4.3: a UD multicast datagram from softverbs1 (host-1, on
    # leaf-a port 2) reaches a QP attached to the group on another CA only
    # where the switches' MulticastForwardingTables carry it (set here by
    # SMPs: tests/conformance/mcast_route.cc), a QP on its own CA always.
    # With no entry no other CA gets it; with leaf-a -> 2, 7 and leaf-b ->
    # 7, 1, host-2 (softverbs2) does and host-0 (softverbs0, leaf-a port 1)
    # does not, and leaf-b port 1 counts it as multicast; without leaf-b's
    # port 1 host-2 no longer does; back from softverbs2 it reaches
    # softverbs1 alone. Then the same through opensm's SA (below).
    tool=$lib/../bin/softverbs_mcast_route
    [ -x "$tool" ] || fail "no $tool"
    sm_sweep
    run net ibnetdiscover
    leafa=$(lid_of leaf-a)
    leafb=$(lid_of leaf-b)
    [ -n "$leafa" ] && [ -n "$leafb" ] || { cat "$work/net" >&2; fail "no switch LIDs"; }
    mlid=0xc010
    got() {  # NAME DEVICE: what DEVICE's QP received in run NAME
      awk -v d="$2" '$1 == d { print $2 }' "$work/$1"
    }
    expect_got() {  # NAME DEVICE COUNT
      [ "$(got "$1" "$2")" = "$3" ] || { cat "$work/$1" >&2; fail "$1: $2 received '$(got "$1" "$2")', expected $3"; }
    }
    run none "$tool" send softverbs1 $mlid 5 softverbs0 softverbs1 softverbs2
    expect_got none softverbs1 5
    expect_got none softverbs0 0
    expect_got none softverbs2 0
    [ "$(lid_of leaf-b)" = "$leafb" ] || fail "leaf-b's LID moved"
    run mfta "$tool" mft "$leafa" $mlid 2 7
    run mftb "$tool" mft "$leafb" $mlid 7 1
    run pq0 perfquery -x "$leafb" 1
    before=$(field "$work/pq0" PortMulticastXmitPkts)
    run tree "$tool" send softverbs1 $mlid 5 softverbs0 softverbs1 softverbs2
    expect_got tree softverbs1 5
    expect_got tree softverbs2 5
    expect_got tree softverbs0 0
    run pq1 perfquery -x "$leafb" 1
    [ "$(( $(field "$work/pq1" PortMulticastXmitPkts) - before ))" -ge 5 ] ||
      { cat "$work/pq1" >&2; fail "leaf-b port 1 did not count 5 multicast packets"; }
    echo "tree: softverbs2 $(got tree softverbs2), softverbs0 $(got tree softverbs0); leaf-b port 1 PortMulticastXmitPkts $before -> $(field "$work/pq1" PortMulticastXmitPkts)"
    run mftb2 "$tool" mft "$leafb" $mlid 7
    run cut "$tool" send softverbs1 $mlid 5 softverbs1 softverbs2
    expect_got cut softverbs1 5
    expect_got cut softverbs2 0
    run mftb3 "$tool" mft "$leafb" $mlid 7 1
    run back "$tool" send softverbs2 $mlid 5 softverbs0 softverbs1
    expect_got back softverbs1 5
    expect_got back softverbs0 0
    echo "leaf-b without port 1: softverbs2 $(got cut softverbs2); from softverbs2: softverbs1 $(got back softverbs1), softverbs0 $(got back softverbs0)"
    # Through the SA: opensm running, softverbs1's and softverbs2's ports
    # joined by proxy from softverbs0 (they open no MAD port); opensm
    # programs the MLID it hands out into both switches' MFTs, and the
    # datagrams reach softverbs2 but not softverbs0, which did not join.
    sm_start
    run smi sminfo
    smlid=$(awk '{ print $4; exit }' "$work/smi")
    run join2 "$tool" join softverbs2 "$smlid" 0x1234
    run join1 "$tool" join softverbs1 "$smlid" 0x1234
    samlid=$(cat "$work/join2")
    [ "$(cat "$work/join1")" = "$samlid" ] || fail "the two joins got MLIDs $samlid and $(cat "$work/join1")"
    for _ in $(seq 50); do
      run mftdump ibroute -M "$leafb"
      grep -qi "^$samlid " "$work/mftdump" && break
      sleep 0.2
    done
    grep -qi "^$samlid " "$work/mftdump" || { cat "$work/mftdump" >&2; fail "opensm did not program $samlid into leaf-b"; }
    run sa "$tool" send softverbs1 "$samlid" 5 softverbs0 softverbs2
    expect_got sa softverbs2 5
    expect_got sa softverbs0 0
    echo "SA join: MLID $samlid; softverbs2 $(got sa softverbs2), softverbs0 $(got sa softverbs0)"
    ;;
  *) fail "unknown scenario" ;;
esac
echo "PASS: $scenario"
