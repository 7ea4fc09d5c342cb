#!/usr/bin/env bash
# The RDMA CM between two network namespaces on softverbs_roce0: Debian's
# rdmacm-utils, unmodified, through our librdmacm.so.1, and the CM's wire.
#   cm.sh <dir of librdmacm.so.1> <scenario>
#   rping      rping -s / -c -C 10 -v across the veth pair (IPv4)
#   capture    rping -C 2, captured with dumpcap on namespace A's veth:
#              tshark dissects REQ, REP, RTU, DREQ and DREP as InfiniBand CM
#              MADs (class 0x07, UD to QP1, Q_Key 0x80010000, source QP 1),
#              the REQ's private data as IP CM data naming both addresses
#              and the port, nothing malformed and no expert warning;
#              icrc_check.py recomputes every ICRC; then udaddy: SIDR_REQ
#              and SIDR_REP likewise
#   ucmatose   ucmatose, 4 connections; udaddy: 2 SIDR resolutions
#   udaddy     (datagrams both ways on each side: "return status 0")
#   perftest   the eight perftest tools with -R, and ib_send_lat -R -c UD (SIDR)
#   rping-v6   rping over IPv6 addresses (IPv6 CMA header, GRHs)
#   loss       ucmatose -c 20 with 5 % of every datagram lost both ways
#              (SOFTVERBS_FAULTS): CM retries and duplicates, still connects
#   shared-address  two rping servers on one RoCE address (one process owns
#              the UDP port and forwards): a client reaches each, its REQ
#              routed by service ID to the second process's CM agent
#   peer-exits a client (tests/cm/exit_connected, the 3rd argument) exits
#              while connected to an rping server on the other host: the
#              server gets DISCONNECTED at once (the DREQ sent at exit)
#   ece       ECE across the veth pair (tests/cm/ece_pair, the 3rd
#              argument, external QPs): the client's vendor ID and options
#              reach the server in the REQ, the options it accepts come back
#              in the REP; the REQ and REP captured on A's veth carry them
#              at the bytes Linux's cm.c puts them (IPv4)
#   mckey      mckey -m 239.1.2.3: a server in A of two ids joined to the
#              group (the IPv4-mapped MGID ::ffff:239.1.2.3, an IP group
#              on the veth) each receives the 10 datagrams a sender in B
#              sends to it; mckey-v6 likewise with ff0e::5:6 on IPv6 ports
#   tools      IPv4 then IPv6: rping -q -V (QPs the program makes and moves
#              itself, data validated), rdma_server / rdma_client
#              (synchronous ids), and cmtime -c 100 (100 connections set up
#              and torn down at once)
#   no-listener  a client to a port nobody listens on in the other
#              namespace: RDMA_CM_EVENT_REJECTED (status 8), promptly
#   rspreload  a plain TCP echo program (tests/cm/socket_echo.cc, the 3rd
#              argument) under Debian's librspreload.so across the veth
#              pair: 5 MB echoed over rsockets (both ends say so), and the
#              library's own UDP sockets stay kernel sockets
#   rstream    rstream -T v (rsockets, non-blocking calls) and -T a -T v
#              (rpoll) across the veth pair, IPv4 then IPv6: data checked
#              on both sides; riostream -T v (riowrite into the peer's
#              window) likewise, and riostream's 64-byte latency loop
#              (IPv4); rstream -f gid (AF_IB) refused on the RoCE port
#              (ENODEV), as the kernel's cma
#   udpong     udpong (datagram rsockets over UD QPs) across the veth pair,
#              IPv4 then IPv6: echoed datagrams of 64 and 1536 bytes with
#              non-blocking calls, through rpoll and blocking, and a
#              bandwidth run the server counts; the server sees the
#              client's address; a capture of a short run dissected by
#              tshark: the UDP data and control headers (tag, version, op,
#              length, QPN, address), then UD SENDs (Q_Key 0x01234567)
#              each starting with the header naming its sender
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
lib=$(realpath "$1")
scenario=$2
for tool in rping dumpcap tshark; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool is not installed (scripts/deps.sh)"; exit 77; }
done
. "$here/netns.sh"
netns_up
work=$(mktemp -d)
cleanup() {
  netns_down
  rm -rf "$work" /dev/shm/softverbs-itest-cm-$$-*
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# capture_start FILTER PCAP: dumpcap on namespace A's veth into PCAP, back
# once it captures; its PID in $cap.
capture_start() {
  ip netns exec "$NETNS_A" timeout 60 dumpcap -i "va-$$" -f "$1" -P -w "$2" > "$work/dumpcap.out" 2>&1 &
  cap=$!
  NETNS_PIDS+=("$cap")
  for _ in $(seq 100); do
    grep -qs "^Capturing on" "$work/dumpcap.out" && break
    sleep 0.05
  done
  grep -q "^Capturing on" "$work/dumpcap.out" || fail "dumpcap did not start: $(cat "$work/dumpcap.out")"
}
# capture_stop PCAP: stops dumpcap with what it holds; PCAP must have no
# malformed packet and no expert warning.
capture_stop() {
  sleep 0.6  # dumpcap hands packets over in 250 ms blocks
  kill -INT "$cap"
  wait "$cap" || true
  local bad
  bad=$(tshark -n -r "$1" -Y '_ws.malformed || _ws.expert.severity >= "Warning"' 2> /dev/null)
  [ -z "$bad" ] || fail "malformed or expert warnings: $bad"
}

env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_A" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cm-$$-a)
env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR_B" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cm-$$-b)
port=7174

# rping_pair <count>: server in A, client in B (retried while nobody listens yet).
rping_pair() {
  local count=$1
  spawn in_a env "${env_a[@]}" timeout 60 rping -s -a "$ADDR_A" -p $port -C "$count" -v > "$work/server.out" 2>&1
  local server=${NETNS_PIDS[-1]} ok=0
  for _ in $(seq 100); do
    if in_b env "${env_b[@]}" timeout 60 rping -c -a "$ADDR_A" -p $port -C "$count" -v > "$work/client.out" 2>&1; then
      ok=1
      break
    fi
    grep -q 'RDMA_CM_EVENT_REJECTED, error 8' "$work/client.out" || break
    sleep 0.1
  done
  [ $ok = 1 ] || fail "rping client: $(cat "$work/client.out")"
  wait "$server" || fail "rping server: $(cat "$work/server.out")"
  [ "$(grep -c '^ping data: rdma-ping-' "$work/client.out")" -eq "$count" ] || fail "client: $(cat "$work/client.out")"
  [ "$(grep -c '^server ping data: rdma-ping-' "$work/server.out")" -eq "$count" ] || fail "server: $(cat "$work/server.out")"
}

# pair <name> <retry pattern> <success pattern> <server command> -- <client command>:
# server in A, client in B; the client is rerun while its output matches
# the retry pattern (nobody listens yet), and both must print the success
# pattern (the server SERVER_OK instead, where set) and exit 0.
pair() {
  local name=$1 retry=$2 ok=$3
  shift 3
  local server_cmd=() client_cmd=()
  while [ "$1" != -- ]; do server_cmd+=("$1"); shift; done
  shift
  client_cmd=("$@")
  spawn in_a env "${env_a[@]}" timeout 60 stdbuf -o0 "${server_cmd[@]}" > "$work/server.out" 2>&1
  local server=${NETNS_PIDS[-1]}
  # Start the client once the server says it waits (READY, a pattern of its
  # output), then a little more for its listen: perftest's client does not
  # survive an early reject (it reuses the id it destroyed).
  if [ -n "${READY:-}" ]; then
    for _ in $(seq 200); do grep -qE "$READY" "$work/server.out" && break; sleep 0.05; done
    sleep "${READY_DELAY:-0.3}"
  else
    sleep 0.2
  fi
  for _ in $(seq 100); do
    in_b env "${env_b[@]}" timeout 60 stdbuf -o0 "${client_cmd[@]}" > "$work/client.out" 2>&1 && break
    grep -qE "$retry" "$work/client.out" || fail "$name client: $(cat "$work/client.out")"
    sleep 0.1
  done
  grep -qE "$ok" "$work/client.out" || fail "$name client: $(cat "$work/client.out")"
  wait "$server" || fail "$name server: $(cat "$work/server.out")"
  grep -qE "${SERVER_OK:-$ok}" "$work/server.out" || fail "$name server: $(cat "$work/server.out")"
  echo "$name over softverbs_roce0, $ADDR_B -> $ADDR_A: passed"
}

# mckey_pair <group> <address of A> <address of B> <MGID printed>: the
# server's two ids must join before the sender sends; its receive loop
# counts completions until it has all 10 (a member the datagrams miss never
# finishes: the timeout fails it).
mckey_pair() {
  local group=$1 local_a=$2 local_b=$3 mgid=$4
  spawn in_a env "${env_a[@]}" timeout 30 stdbuf -oL mckey -m "$group" -b "$local_a" -c 2 -C 10 > "$work/server.out" 2>&1
  local server=${NETNS_PIDS[-1]}
  for _ in $(seq 200); do
    [ "$(grep -c '^mckey: joined' "$work/server.out")" -ge 2 ] && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.05
  done
  [ "$(grep -c "^mckey: joined dgid: $mgid mlid 0x0 " "$work/server.out")" -eq 2 ] || fail "mckey server: $(cat "$work/server.out")"
  in_b env "${env_b[@]}" timeout 30 mckey -m "$group" -b "$local_b" -s -C 10 > "$work/client.out" 2>&1 ||
    fail "mckey sender: $(cat "$work/client.out")"
  grep -q 'data transfers complete' "$work/client.out" || fail "mckey sender: $(cat "$work/client.out")"
  wait "$server" || fail "mckey server: $(cat "$work/server.out")"
  grep -q 'data transfers complete' "$work/server.out" || fail "mckey server: $(cat "$work/server.out")"
  grep -q 'return status 0' "$work/server.out" || fail "mckey server: $(cat "$work/server.out")"
  echo "mckey $group over softverbs_roce0, $local_b -> $local_a: 2 members received 10 datagrams (MGID $mgid)"
}

case $scenario in
  mckey)
    mckey_pair 239.1.2.3 "$ADDR_A" "$ADDR_B" ::ffff:239.1.2.3
    ;;
  mckey-v6)
    env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR6_A" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cm-$$-a)
    env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR6_B" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cm-$$-b)
    mckey_pair ff0e::5:6 "$ADDR6_A" "$ADDR6_B" ff0e::5:6
    ;;
  shared-address)
    spawn in_a env "${env_a[@]}" timeout 60 rping -s -a "$ADDR_A" -p 7001 -C 3 -v > "$work/s1.out" 2>&1
    s1=${NETNS_PIDS[-1]}
    sleep 0.3  # the first takes the UDP port
    spawn in_a env "${env_a[@]}" timeout 60 rping -s -a "$ADDR_A" -p 7002 -C 3 -v > "$work/s2.out" 2>&1
    s2=${NETNS_PIDS[-1]}
    for p in 7002 7001; do
      ok=0
      for _ in $(seq 100); do
        if in_b env "${env_b[@]}" timeout 30 rping -c -a "$ADDR_A" -p $p -C 3 -v > "$work/c$p.out" 2>&1; then ok=1; break; fi
        grep -q 'RDMA_CM_EVENT_REJECTED, error 8' "$work/c$p.out" || break
        sleep 0.1
      done
      [ $ok = 1 ] || fail "client to port $p: $(cat "$work/c$p.out")"
      grep -q 'rdma-ping-2: ' "$work/c$p.out" || fail "client to port $p: $(cat "$work/c$p.out")"
    done
    wait "$s1" || fail "server 1: $(cat "$work/s1.out")"
    wait "$s2" || fail "server 2: $(cat "$work/s2.out")"
    echo "two rping servers on $ADDR_A (one forwarding for the other): both reached"
    ;;
  peer-exits)
    helper=$3
    spawn in_a env "${env_a[@]}" timeout 60 rping -s -a "$ADDR_A" -p $port > "$work/server.out" 2>&1
    server=${NETNS_PIDS[-1]}
    for _ in $(seq 100); do
      in_b env "${env_b[@]}" timeout 30 "$helper" "$ADDR_A" $port > "$work/client.out" 2>&1 && break
      grep -q 'REJECTED, status 8' "$work/client.out" || fail "client: $(cat "$work/client.out")"
      sleep 0.1
    done
    grep -q connected "$work/client.out" || fail "client: $(cat "$work/client.out")"
    start=$(date +%s%N)
    for _ in $(seq 100); do kill -0 "$server" 2> /dev/null || break; sleep 0.05; done
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    kill -0 "$server" 2> /dev/null && fail "the server still waits ${ms} ms after its client exited"
    wait "$server" || true
    grep -q 'server DISCONNECT EVENT' "$work/server.out" || fail "server: $(cat "$work/server.out")"
    echo "client exited connected: the server on the other host got DISCONNECTED within $ms ms"
    ;;
  tools)
    for v in 4 6; do
      if [ $v = 6 ]; then
        env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR6_A" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cm-$$-a6)
        env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR6_B" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cm-$$-b6)
        a=$ADDR6_A
      else
        a=$ADDR_A
      fi
      port=$((port + 1))
      pair "rping -q -V (IPv$v)" 'RDMA_CM_EVENT_REJECTED, error 8' 'rdma-ping-9: ' rping -s -a "$a" -p $port -C 10 -q -v -V -- \
        rping -c -a "$a" -p $port -C 10 -q -v -V
      port=$((port + 1))
      pair "rdma_server / rdma_client (IPv$v)" 'rdma_connect: Connection refused' 'end 0' rdma_server -s "$a" -p $port -- \
        rdma_client -s "$a" -p $port
      # cmtime's server never exits: it is killed (by PID) with the rest.
      port=$((port + 1))
      spawn in_a env "${env_a[@]}" timeout 100 cmtime -b "$a" -p $port > "$work/cmtime-server.out" 2>&1
      sleep 0.2
      for _ in $(seq 100); do
        in_b env "${env_b[@]}" timeout 100 cmtime -s "$a" -p $port -c 100 > "$work/client.out" 2>&1 && break
        grep -q 'RDMA_CM_EVENT_REJECTED' "$work/client.out" || fail "cmtime client: $(cat "$work/client.out")"
        sleep 0.1
      done
      grep -qE '^connect +:' "$work/client.out" || fail "cmtime client: $(cat "$work/client.out")"
      echo "cmtime -c 100 (IPv$v) over softverbs_roce0:"
      grep -E '^(resolve addr|connect|disconnect) +:' "$work/client.out"
    done
    ;;
  rping-v6)
    env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR6_A" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cm-$$-a)
    env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR6_B" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cm-$$-b)
    pair "rping (IPv6)" 'RDMA_CM_EVENT_REJECTED, error 8' 'rdma-ping-9: ' rping -s -a "$ADDR6_A" -C 10 -v -- rping -c -a "$ADDR6_A" -C 10 -v
    ;;
  loss)
    env_a+=(SOFTVERBS_FAULTS=loss=0.05,seed=3)
    env_b+=(SOFTVERBS_FAULTS=loss=0.05,seed=5)
    pair "ucmatose -c 20, 5 % loss" 'RDMA_CM_EVENT_REJECTED, error: 8' 'return status 0' ucmatose -c 20 -- ucmatose -s "$ADDR_A" -c 20
    ;;
  rspreload)
    helper=$3
    preload=$(ls /usr/lib/*/rsocket/librspreload.so 2> /dev/null | head -1)
    [ -n "$preload" ] || { echo "SKIP: librspreload.so is not installed (librdmacm1)"; exit 77; }
    spawn in_a env "${env_a[@]}" LD_PRELOAD="$preload" timeout 60 "$helper" server "$ADDR_A" $port > "$work/server.out" 2>&1
    server=${NETNS_PIDS[-1]}
    for _ in $(seq 100); do grep -q listening "$work/server.out" && break; sleep 0.05; done
    in_b env "${env_b[@]}" LD_PRELOAD="$preload" timeout 60 "$helper" client "$ADDR_A" $port 5000000 > "$work/client.out" 2>&1 ||
      fail "client: $(cat "$work/client.out")"
    wait "$server" || fail "server: $(cat "$work/server.out")"
    grep -q 'verified (rsocket 1)' "$work/client.out" || fail "client: $(cat "$work/client.out")"
    grep -q 'echoed 5000000 bytes (rsocket 1)' "$work/server.out" || fail "server: $(cat "$work/server.out")"
    echo "librspreload over softverbs_roce0, $ADDR_B -> $ADDR_A: 5 MB echoed over rsockets"
    ;;
  rstream)
    pair "rstream -T v" 'Connection refused' '^custom ' rstream -b "$ADDR_A" -p $port -T v -C 200 -S 100000 -- \
      rstream -s "$ADDR_A" -p $port -T v -C 200 -S 100000
    pair "rstream -T a -T v" 'Connection refused' '^custom ' rstream -b "$ADDR_A" -p $port -T a -T v -C 100 -S 1000000 -- \
      rstream -s "$ADDR_A" -p $port -T a -T v -C 100 -S 1000000
    pair "riostream -T v" 'Connection refused' '^custom ' riostream -b "$ADDR_A" -p $port -T v -C 200 -S 100000 -- \
      riostream -s "$ADDR_A" -p $port -T v -C 200 -S 100000
    # riostream's latency loop: each side writes its marker into the byte
    # the peer's WRITE just landed in, which the receive thread must not
    # store again (transport/placement_copy.h). Both sides spin on memory,
    # so on two cores each round waits for a receive thread to get a core
    # (about 0.5 ms): 1000 rounds, not the default run's 100 000.
    pair "riostream -S 64 -I 1000" 'Connection refused' '^custom ' riostream -b "$ADDR_A" -p $port -S 64 -C 1 -I 1000 -- \
      riostream -s "$ADDR_A" -p $port -S 64 -C 1 -I 1000
    env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR6_A" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cm-$$-a6)
    env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR6_B" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cm-$$-b6)
    pair "rstream -T v (IPv6)" 'Connection refused' '^custom ' rstream -b "$ADDR6_A" -p $port -T v -C 200 -S 100000 -- \
      rstream -s "$ADDR6_A" -p $port -T v -C 200 -S 100000
    pair "riostream -T v (IPv6)" 'Connection refused' '^custom ' riostream -b "$ADDR6_A" -p $port -T v -C 200 -S 100000 -- \
      riostream -s "$ADDR6_A" -p $port -T v -C 200 -S 100000
    # An IB address (rstream -f gid) on a RoCE port: the kernel's cma binds
    # AF_IB only on ports with the InfiniBand protocol (ENODEV), and so do we.
    if in_a env "${env_a[@]}" timeout 30 rstream -f gid -b "$ADDR6_A" -p $port -C 1 -S 100 > "$work/gid.out" 2>&1; then
      fail "rstream -f gid bound on softverbs_roce0: $(cat "$work/gid.out")"
    fi
    grep -q '^rbind: No such device' "$work/gid.out" || fail "rstream -f gid on RoCE: $(cat "$work/gid.out")"
    echo "rstream -f gid on softverbs_roce0: rbind fails with ENODEV, as the kernel's cma"
    ;;
  udpong)
    # udpong's server serves until killed; a client logs in (over UDP, until
    # it has the server's QPN, then over UD) and prints one result line.
    udpong_pair() {
      local bind=$1 client=$2
      shift 2
      spawn in_a env "${env_a[@]}" timeout 60 stdbuf -oL udpong -b "$bind" -p $port "$@" > "$work/server.out" 2>&1
      local server=${NETNS_PIDS[-1]}
      sleep 0.2  # not needed for success (the client logs in again each second), but quicker
      in_b env "${env_b[@]}" timeout 60 udpong -s "$bind" -p $port "$@" > "$work/client.out" 2>&1 ||
        fail "udpong client $*: $(cat "$work/client.out")"
      kill -0 "$server" 2>/dev/null || fail "udpong server $* exited: $(cat "$work/server.out")"
      grep -qE '^custom +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+s' "$work/client.out" ||
        fail "udpong client $*: $(cat "$work/client.out")"
      # Nothing lost into oblivion: the server counted datagrams.
      grep -qE '^custom +[0-9.]+[kmg]? +0 ' "$work/client.out" && fail "udpong $*: the server received nothing"
      grep -q "^client login from $client\$" "$work/server.out" || fail "udpong server $*: $(cat "$work/server.out")"
      # The server, by PID (a capture there goes on).
      for p in $(ip netns pids "$NETNS_A"); do
        [ "$(cat "/proc/$p/comm" 2>/dev/null)" = udpong ] && kill -TERM "$p" 2>/dev/null || true
      done
      wait "$server" 2>/dev/null || true
      echo "udpong $* over softverbs_roce0, $client -> $bind: $(grep '^custom' "$work/client.out")"
    }
    # The wire, IPv4: the client's first datagram over UDP (tag, version 4,
    # op data, length 16, its QPN, its address), the server's control answer
    # with its QPN, then UD SENDs with Q_Key 0x01234567, each starting with
    # the 8-byte header naming its sender's address and port.
    hex_addr() { local IFS=.; printf '%02x' $1; }
    pcap=$work/udpong.pcap
    capture_start "udp port 4791 or udp port $port" "$pcap"
    udpong_pair "$ADDR_A" "$ADDR_B" -T e -C 20 -S 64
    capture_stop "$pcap"
    ts() { tshark -n "$@" 2> /dev/null; }
    a_hex=$(hex_addr "$ADDR_A") b_hex=$(hex_addr "$ADDR_B")
    # One pass of tshark (slow to start on a busy host): source, UDP ports,
    # BTH opcode, DETH Q_Key, UDP payload, IB payload.
    ts -r "$pcap" -T fields -E occurrence=f -e ip.src -e udp.srcport -e udp.dstport \
      -e infiniband.bth.opcode -e infiniband.deth.q_key -e udp.payload -e data.data > "$work/udpong.fields"
    awk -F'\t' -v p=$port '$3 == p && $4 == "" {print $6}' "$work/udpong.fields" | grep -qE "^5555555504001000[0-9a-f]{8}$b_hex" ||
      fail "no UDP data message from $ADDR_B: $(cat "$work/udpong.fields")"
    awk -F'\t' -v p=$port '$2 == p && $4 == "" {print $6}' "$work/udpong.fields" | grep -qxE "5555555504071000[0-9a-f]{8}$a_hex" ||
      fail "no UDP control answer from $ADDR_A: $(cat "$work/udpong.fields")"
    ud=$(awk -F'\t' '$4 == 100 && $5 ~ /01234567$/ {print $1, $7}' "$work/udpong.fields")
    n_a=$(grep -cE "^$ADDR_A 04081c06$a_hex" <<<"$ud") || true
    n_b=$(grep -cE "^$ADDR_B 0408[0-9a-f]{4}$b_hex" <<<"$ud") || true
    # 21 round trips (the start message and 20 echoes) after the login.
    [ "$n_a" -ge 21 ] && [ "$n_b" -ge 20 ] || fail "UD sends with the datagram header: $n_a from A, $n_b from B: $ud"
    echo "udpong on the wire: UDP data and control headers, then $n_a + $n_b UD SENDs (Q_Key 0x01234567) with the sender's header"
    port=$((port + 1))
    for v in 4 6; do
      if [ $v = 6 ]; then
        env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR6_A" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cm-$$-a6)
        env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$ADDR6_B" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cm-$$-b6)
        a=$ADDR6_A b=$ADDR6_B
      else
        a=$ADDR_A b=$ADDR_B
      fi
      udpong_pair "$a" "$b" -T e -C 500 -S 64
      udpong_pair "$a" "$b" -T a -T e -C 500 -S 1536
      udpong_pair "$a" "$b" -T b -T e -C 500 -S 1000
      udpong_pair "$a" "$b" -C 5000 -S 1536
    done
    ;;
  ucmatose)
    pair ucmatose 'RDMA_CM_EVENT_REJECTED, error: 8' 'return status 0' ucmatose -c 4 -- ucmatose -s "$ADDR_A" -c 4
    ;;
  udaddy)
    pair udaddy 'RDMA_CM_EVENT_UNREACHABLE, error: 1' 'return status 0' udaddy -c 2 -- udaddy -s "$ADDR_A" -c 2
    ;;
  perftest)
    command -v ib_write_bw > /dev/null || { echo "SKIP: perftest is not installed"; exit 77; }
    pt=(-d softverbs_roce0 -R -x 0 -n 100)
    for tool in ib_write_bw ib_write_lat ib_read_bw ib_read_lat ib_send_bw ib_send_lat ib_atomic_bw ib_atomic_lat; do
      # The READ and atomic latency servers only answer: they print no figures.
      server_ok='^ [0-9]+ +100 '
      case $tool in ib_read_lat|ib_atomic_lat) server_ok='Waiting for client to connect' ;; esac
      # perftest says it waits a little before it listens, and its client
      # does not survive an early reject (it reuses the id it destroyed:
      # a crash or a hang), so the client starts a second later.
      SERVER_OK=$server_ok READY_DELAY=1 READY='Waiting for client to connect' pair "$tool -R" 'Unexpected CM event bl blka 8$|RDMA_CM_EVENT_REJECTED; error: 8\.' '^ [0-9]+ +100 ' \
        "$tool" "${pt[@]}" -- "$tool" "${pt[@]}" "$ADDR_A"
    done
    READY='Waiting for client to connect' pair "ib_send_lat -R -c UD" 'RDMA_CM_EVENT_UNREACHABLE; error: 1\.' '^ 2 +100 ' \
      ib_send_lat "${pt[@]}" -c UD -- ib_send_lat "${pt[@]}" -c UD "$ADDR_A"
    ;;
  rping)
    rping_pair 10
    echo "rping over softverbs_roce0, $ADDR_B -> $ADDR_A: 10 pings verified on both sides"
    ;;
  no-listener)
    start=$(date +%s%N)
    if in_b env "${env_b[@]}" timeout 30 rping -c -a "$ADDR_A" -p $port -C 1 > "$work/client.out" 2>&1; then
      fail "connected to nobody: $(cat "$work/client.out")"
    fi
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    # Nobody in A runs a CM agent: the REQ finds no QP1 agent there and is
    # lost; the client retries it and gives up (UNREACHABLE) -- or, with an
    # agent in A, is rejected (8).
    spawn in_a env "${env_a[@]}" timeout 60 rping -s -a "$ADDR_A" -p $((port + 1)) -C 1 > "$work/server.out" 2>&1
    sleep 0.5
    in_b env "${env_b[@]}" timeout 30 rping -c -a "$ADDR_A" -p $port -C 1 > "$work/client2.out" 2>&1 && fail "connected to nobody"
    grep -q 'RDMA_CM_EVENT_REJECTED, error 8' "$work/client2.out" || fail "expected REJECTED (8): $(cat "$work/client2.out")"
    grep -qE 'RDMA_CM_EVENT_(UNREACHABLE|REJECTED)' "$work/client.out" || fail "expected UNREACHABLE: $(cat "$work/client.out")"
    echo "no agent in A: $(grep -oE 'RDMA_CM_EVENT_[A-Z_]+' "$work/client.out" | head -1) after $ms ms; an agent but no listener on the port: REJECTED (8)"
    ;;
  ece)
    helper=$3
    pcap=$work/ece.pcap
    capture_start "udp port 4791" "$pcap"
    READY='^listening' pair "ECE (ece_pair)" 'REJECTED, status 8' 'ece negotiated' "$helper" server "$ADDR_A" $port -- \
      "$helper" client "$ADDR_A" $port
    capture_stop "$pcap"
    grep -q '^remote ece: vendor 0x0002c9 options 0x80000007$' "$work/server.out" || fail "server: $(cat "$work/server.out")"
    grep -q '^remote ece: vendor 0x0002c9 options 0x80000005$' "$work/client.out" || fail "client: $(cat "$work/client.out")"
    # On the wire: the options in the AttributeModifier, the vendor ID in
    # the REQ's bytes 5..7 and after the REP's QPN, EECN and PSN (the MAD
    # starts 62 bytes into the frame: Ethernet, IPv4, UDP, BTH, DETH).
    for m in 0x0010:0x80000007:29:3 0x0013:0x80000005:39:1; do
      IFS=: read -r attr mod at _ <<< "$m"
      got=$(tshark -n -r "$pcap" -Y "infiniband.mad.attributeid == $attr" -T fields -e infiniband.mad.attributemodifier 2> /dev/null | sort -u)
      [ "$got" = "$mod" ] || fail "attribute $attr's modifier: '$got', want $mod"
    done
    req=$(tshark -n -r "$pcap" -Y 'infiniband.mad.attributeid == 0x0010' -x 2> /dev/null | python3 "$here/ece_bytes.py" req)
    rep=$(tshark -n -r "$pcap" -Y 'infiniband.mad.attributeid == 0x0013' -x 2> /dev/null | python3 "$here/ece_bytes.py" rep)
    [ "$req" = 0x0002c9 ] || fail "REQ's VendorID bytes: '$req'"
    [ "$rep" = 0x0002c9 ] || fail "REP's VendorID bytes: '$rep'"
    echo "REQ and REP on the wire: VendorID $req, AttributeModifier 0x80000007 / 0x80000005"
    ;;
  capture)
    pcap=$work/cm.pcap
    capture_start "udp port 4791" "$pcap"
    rping_pair 2
    pair udaddy 'RDMA_CM_EVENT_UNREACHABLE, error: 1' 'return status 0' udaddy -c 1 -C 2 -- udaddy -s "$ADDR_A" -c 1 -C 2
    capture_stop "$pcap"
    ts() { tshark -n "$@" 2> /dev/null; }
    for attr in 0x0010:REQ 0x0013:REP 0x0014:RTU 0x0015:DREQ 0x0016:DREP 0x0017:SIDR_REQ 0x0018:SIDR_REP; do
      n=$(ts -r "$pcap" -Y "infiniband.mad.mgmtclass == 0x07 && infiniband.mad.attributeid == ${attr%%:*} && infiniband.bth.destqp == 1 && infiniband.deth.srcqp == 1 && infiniband.deth.q_key == 0x80010000" | wc -l)
      [ "$n" -ge 1 ] || fail "no ${attr#*:} (attribute ${attr%%:*}) to QP1 in the capture"
      echo "${attr#*:}: $n"
    done
    ipcm=$(ts -r "$pcap" -Y 'infiniband.cm.req.ip_cm' -T fields -e infiniband.cm.req.ip_cm.sip4 -e infiniband.cm.req.ip_cm.dip4 -e infiniband.cm.req.ip_cm.ipv | sort -u)
    [ "$ipcm" = "$ADDR_B	$ADDR_A	0x04" ] || fail "REQ's IP CM data: '$ipcm'"
    echo "REQ's IP CM data: $ipcm"
    timeout 120 /usr/bin/python3 "$here/icrc_check.py" "$pcap" || fail "ICRC check"
    ;;
  *)
    echo "unknown scenario $scenario" >&2
    exit 2
    ;;
esac
