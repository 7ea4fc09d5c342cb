#!/usr/bin/env bash
# Debian's rdmacm-utils, unmodified, on softverbs0 through our librdmacm.so.1
# and libibverbs.so.1 (LD_LIBRARY_PATH).
# Usage: rdmacm_utils.sh <dir of our librdmacm.so.1> <scenario>
#   rping              rping -s / rping -c -a 127.0.0.1 -C 10 -v: every ping
#                      verified on both sides, both exit 0
#   rping-q            rping -q -V: QPs the program makes and moves itself
#                      (rdma_init_qp_attr, CONNECT_RESPONSE, rdma_establish),
#                      every ping validated; both exit 0
#   rping-no-listener  a client with nobody listening: RDMA_CM_EVENT_REJECTED
#                      (REJ, invalid service ID), exit non-zero, promptly
#   ucmatose           ucmatose server and client, 4 connections at once,
#                      sends both ways, disconnect: "return status 0" on both
#   rping-server-killed  the server killed (SIGKILL) mid-session: the client
#                      gets DISCONNECTED within a second (the CM watches peers
#                      on its own port) and exits, no hang
#   cmtime             cmtime -c 1000: a thousand connections set up and torn
#                      down at once (its server runs until killed)
#   udaddy             udaddy server and client, 2 UD "connections" resolved
#                      by SIDR, datagrams both ways: "return status 0"
#   rdma_server-client rdma_server / rdma_client: synchronous ids
#                      (rdma_create_ep, rdma_get_request), one send each way
#   rstream            rstream server and client, unmodified default run:
#                      rsockets (rdma-core's protocol) with non-blocking
#                      calls, latency then bandwidth tests of 64 B .. 1 MB
#                      (two connections), all 8 result lines on both sides
#   rstream-verify     rstream -T v: 1000 transfers of 100000 bytes, every
#                      byte checked on both sides, then 4 MB ones
#   rstream-async      rstream -T a -T v: non-blocking sockets driven by rpoll
#                      (POLLIN/POLLOUT), data checked
#   rstream-blocking   rstream -T b -T v -B 4096: blocking calls (MSG_WAITALL)
#                      through 8 KB buffers, so credits and buffer updates
#                      go back and forth thousands of times
#   rstream-no-listener  a client with nobody listening: rconnect fails with
#                      ECONNREFUSED, promptly
#   rstream-server-killed  the server killed (SIGKILL) mid-transfer: the
#                      blocking client's rsend/rrecv fails (or sees end of
#                      file) and it exits within two seconds, no hang
#   rspreload          an ordinary TCP echo program (tests/cm/socket_echo.cc,
#                      the 3rd argument) under Debian's librspreload.so:
#                      5 MB echoed and checked, both ends report their
#                      sockets are rsockets, and the kernel holds no TCP
#                      listener on the port (the data went over the device)
#   riostream          riostream -T v (riomap, riowrite into the peer's
#                      window, data checked), then -T a -T v (rpoll) and
#                      -T b -T v (blocking), then the default run 5 times:
#                      in its latency tests each side polls the last byte of
#                      a buffer that straddles two cache lines and, once the
#                      peer's marker is there, writes its own marker into
#                      that byte; a placement that stores a byte twice (as
#                      glibc's AVX-512 memcpy does) overwrites it and the run
#                      stalls (transport/placement_copy.h)
#   rstream-gid        rstream -f gid: IB addresses (AF_IB, rdma_getaddrinfo's
#                      RAI_FAMILY), the server bound to softverbs0's GID
#                      (-b), the client to it (-s); -T v then -T a -T v,
#                      data checked on both sides
#   riostream-gid      the same with riostream (riomap, riowrite)
#   udpong             udpong (datagram rsockets, rdma-core's ds_* protocol
#                      over UD QPs) on 127.0.0.1: echoed datagrams of 64,
#                      1000 and 1536 bytes with non-blocking calls (the
#                      default), through rpoll (-T a) and blocking (-T b),
#                      then a bandwidth run the server counts; the server
#                      names the client's address
#   udpong-v6          the same on ::1
#   mckey              mckey -m <group> -b <loopback>: a server of two ids
#                      joined to the group each receives the 10 datagrams a
#                      sender sends to it (IPv4 239.1.2.3, then IPv6 ff0e::);
#                      the MGID printed is the kernel's IPoIB one
set -euo pipefail
libdir=$1
scenario=$2
export LD_LIBRARY_PATH=$libdir
export SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-cm-$scenario-$$
pids=()
cleanup() {
  # TERM first: most pids are `timeout`, which passes it on to its child; a
  # KILL would leave that child running.
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  [ ${#pids[@]} -eq 0 ] || sleep 0.2
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$SOFTVERBS_DEVICE_PATH" "$SOFTVERBS_DEVICE_PATH.sysfs" "$SOFTVERBS_DEVICE_PATH.cm"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v rping >/dev/null || { echo "rdmacm-utils is not installed (scripts/deps.sh)"; exit 77; }
# The segment is private to this run, and with it the CM's port table: any
# port will do.
port=7174

# client_until_listening <log> <client command...>: the server may not listen
# yet; retry only a client that was rejected for want of a listener.
client_until_listening() {
  local log=$1; shift
  for _ in $(seq 100); do
    if timeout 60 "$@" >"$log" 2>&1; then return 0; fi
    grep -q 'RDMA_CM_EVENT_REJECTED, error 8' "$log" || return 1
    sleep 0.1
  done
  return 1
}

case $scenario in
  rping)
    slog=$(mktemp) clog=$(mktemp)
    timeout 60 rping -s -a 127.0.0.1 -p $port -C 10 -v >"$slog" 2>&1 &
    spid=$!
    pids+=("$spid")
    client_until_listening "$clog" rping -c -a 127.0.0.1 -p $port -C 10 -v ||
      fail "rping client: $(cat "$clog")"
    wait "$spid" || fail "rping server (rc $?): $(cat "$slog")"
    [ "$(grep -c '^ping data: rdma-ping-' "$clog")" -eq 10 ] || fail "client printed $(cat "$clog")"
    [ "$(grep -c '^server ping data: rdma-ping-' "$slog")" -eq 10 ] || fail "server printed $(cat "$slog")"
    grep -q 'rdma-ping-9: JKLMNOPQRSTUVWXYZ' "$clog" || fail "client's last ping: $(tail -1 "$clog")"
    echo "rping: 10 pings verified on both sides"
    tail -2 "$clog"
    rm -f "$slog" "$clog"
    ;;
  rping-q)
    slog=$(mktemp) clog=$(mktemp)
    timeout 60 rping -s -a 127.0.0.1 -p $port -C 10 -q -V >"$slog" 2>&1 &
    spid=$!
    pids+=("$spid")
    client_until_listening "$clog" rping -c -a 127.0.0.1 -p $port -C 10 -q -V ||
      fail "rping -q client: $(cat "$clog")"
    wait "$spid" || fail "rping -q server (rc $?): $(cat "$slog")"
    echo "rping -q -V: 10 pings validated with self-managed QPs"
    rm -f "$slog" "$clog"
    ;;
  rping-no-listener)
    clog=$(mktemp)
    start=$(date +%s%N)
    if timeout 30 rping -c -a 127.0.0.1 -p $port -C 1 >"$clog" 2>&1; then fail "rping connected to nobody: $(cat "$clog")"; fi
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    grep -q 'RDMA_CM_EVENT_REJECTED, error 8' "$clog" || fail "expected REJECTED (8): $(cat "$clog")"
    [ $ms -lt 5000 ] || fail "the reject took $ms ms"
    echo "rping to a port with no listener: REJECTED (invalid service ID) in $ms ms"
    rm -f "$clog"
    ;;
  rping-server-killed)
    slog=$(mktemp) clog=$(mktemp)
    rping -s -a 127.0.0.1 -p $port >"$slog" 2>&1 &
    spid=$!
    pids+=("$spid")
    sleep 0.3
    timeout 60 rping -c -a 127.0.0.1 -p $port -V >"$clog" 2>&1 &
    cpid=$!
    pids+=("$cpid")
    sleep 1  # connected and pinging (unbounded count; -V prints nothing)
    kill -0 "$cpid" || fail "the client ended before the kill: $(cat "$clog")"
    kill -KILL "$spid"
    wait "$spid" 2>/dev/null || true
    start=$(date +%s%N)
    for _ in $(seq 100); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.05; done
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    kill -0 "$cpid" 2>/dev/null && fail "the client still runs ${ms} ms after its server was killed: $(cat "$clog")"
    wait "$cpid" || true
    grep -q 'client DISCONNECT EVENT' "$clog" || fail "no DISCONNECTED: $(cat "$clog")"
    echo "rping server killed: the client got DISCONNECTED and exited within $ms ms"
    rm -f "$slog" "$clog"
    ;;
  cmtime)
    slog=$(mktemp) clog=$(mktemp)
    cmtime -p $port >"$slog" 2>&1 &
    spid=$!
    pids+=("$spid")
    sleep 0.2
    for _ in $(seq 100); do
      timeout 100 cmtime -s 127.0.0.1 -p $port -c 1000 >"$clog" 2>&1 && break
      grep -q 'RDMA_CM_EVENT_REJECTED' "$clog" || fail "cmtime client: $(cat "$clog")"
      sleep 0.1
    done
    grep -qE '^connect +:' "$clog" || fail "cmtime client: $(cat "$clog")"
    kill -0 "$spid" || fail "cmtime server exited: $(cat "$slog")"
    echo "cmtime -c 1000:"
    grep -E '^(resolve addr|connect|disconnect) +:' "$clog"
    rm -f "$slog" "$clog"
    ;;
  ucmatose)
    slog=$(mktemp) clog=$(mktemp)
    timeout 60 ucmatose -p $port -c 4 >"$slog" 2>&1 &
    spid=$!
    pids+=("$spid")
    sleep 0.2  # a client rejected early leaves the server requests it must then time out
    for _ in $(seq 100); do
      timeout 60 ucmatose -s 127.0.0.1 -p $port -c 4 >"$clog" 2>&1 && break
      grep -q 'event: RDMA_CM_EVENT_REJECTED, error: 8' "$clog" || fail "ucmatose client: $(cat "$clog")"
      sleep 0.1
    done
    grep -q 'return status 0' "$clog" || fail "ucmatose client: $(cat "$clog")"
    wait "$spid" || fail "ucmatose server (rc $?): $(cat "$slog")"
    grep -q 'return status 0' "$slog" || fail "ucmatose server: $(cat "$slog")"
    echo "ucmatose: 4 connections, both sides: return status 0"
    rm -f "$slog" "$clog"
    ;;
  udaddy)
    # udaddy's -p is the port space; its port is always 7174.
    slog=$(mktemp) clog=$(mktemp)
    timeout 60 udaddy -c 2 >"$slog" 2>&1 &
    spid=$!
    pids+=("$spid")
    sleep 0.2
    for _ in $(seq 100); do
      timeout 60 udaddy -s 127.0.0.1 -c 2 >"$clog" 2>&1 && break
      # Nobody listening yet: the SIDR_REP says "no service" (UNREACHABLE, 1).
      grep -q 'RDMA_CM_EVENT_UNREACHABLE, error: 1' "$clog" || fail "udaddy client: $(cat "$clog")"
      sleep 0.1
    done
    grep -q 'return status 0' "$clog" || fail "udaddy client: $(cat "$clog")"
    wait "$spid" || fail "udaddy server (rc $?): $(cat "$slog")"
    grep -q 'return status 0' "$slog" || fail "udaddy server: $(cat "$slog")"
    echo "udaddy: 2 SIDR resolutions, datagrams both ways: return status 0"
    rm -f "$slog" "$clog"
    ;;
  mckey)
    # mckey's receiver counts completions until it has -C of them: a member
    # not in the group never finishes (the timeout fails it).
    for case in "239.1.2.3 127.0.0.1 ff12:4001:ffff::f01:203" "ff0e::5:6 ::1 ff12:6001:ffff::5:6"; do
      read -r group local mgid <<<"$case"
      slog=$(mktemp) clog=$(mktemp)
      timeout 30 stdbuf -oL mckey -m "$group" -b "$local" -c 2 -C 10 >"$slog" 2>&1 &
      spid=$!
      pids+=("$spid")
      for _ in $(seq 200); do
        [ "$(grep -c '^mckey: joined' "$slog")" -ge 2 ] && break
        kill -0 "$spid" 2>/dev/null || break
        sleep 0.05
      done
      [ "$(grep -c "^mckey: joined dgid: $mgid mlid 0x[c-f]" "$slog")" -eq 2 ] || fail "mckey server: $(cat "$slog")"
      timeout 30 mckey -m "$group" -b "$local" -s -C 10 >"$clog" 2>&1 || fail "mckey sender (rc $?): $(cat "$clog")"
      grep -q 'data transfers complete' "$clog" || fail "mckey sender: $(cat "$clog")"
      wait "$spid" || fail "mckey server (rc $?): $(cat "$slog")"
      grep -q 'data transfers complete' "$slog" || fail "mckey server: $(cat "$slog")"
      grep -q 'return status 0' "$slog" || fail "mckey server: $(cat "$slog")"
      echo "mckey $group: 2 members received the sender's 10 datagrams (MGID $mgid)"
      rm -f "$slog" "$clog"
    done
    ;;
  rdma_server-client)
    slog=$(mktemp) clog=$(mktemp)
    timeout 60 rdma_server -p $port >"$slog" 2>&1 &
    spid=$!
    pids+=("$spid")
    for _ in $(seq 100); do
      timeout 60 rdma_client -s 127.0.0.1 -p $port >"$clog" 2>&1 && break
      grep -q 'rdma_connect: Connection refused' "$clog" || fail "rdma_client: $(cat "$clog")"
      sleep 0.1
    done
    grep -q 'rdma_client: end 0' "$clog" || fail "rdma_client: $(cat "$clog")"
    wait "$spid" || fail "rdma_server (rc $?): $(cat "$slog")"
    grep -q 'rdma_server: end 0' "$slog" || fail "rdma_server: $(cat "$slog")"
    echo "rdma_server / rdma_client: end 0 on both"
    rm -f "$slog" "$clog"
    ;;
  rstream|rstream-verify|rstream-async|rstream-blocking|riostream|rstream-gid|riostream-gid)
    prog=rstream
    # Where the server listens and the client connects: the loopback
    # address, or softverbs0's GID as an IB address.
    server_at=() client_at=(-s 127.0.0.1)
    case $scenario in
      rstream) opts=() ;;
      rstream-verify) opts=(-T v -C 1000 -S 100000) ;;
      rstream-async) opts=(-T a -T v -C 200 -S 100000) ;;
      rstream-blocking) opts=(-T b -T v -B 4096 -C 1000 -S 10000) ;;
      riostream) prog=riostream opts=(-T v -C 1000 -S 100000) ;;
      rstream-gid|riostream-gid)
        [ $scenario = riostream-gid ] && prog=riostream
        opts=(-T v -C 1000 -S 100000)
        command -v ibv_devinfo >/dev/null || { echo "ibverbs-utils is not installed"; exit 77; }
        gid=$(timeout 30 ibv_devinfo -v -d softverbs0 | awk '/GID\[ *0\]:/ {print $NF; exit}')
        [ -n "$gid" ] || fail "no GID for softverbs0 in ibv_devinfo -v"
        server_at=(-f gid -b "$gid") client_at=(-f gid -s "$gid")
        ;;
    esac
    rstream_pair() {
      slog=$(mktemp) clog=$(mktemp)
      timeout ${rs_timeout:-240} $prog "${server_at[@]}" -p $port "$@" >"$slog" 2>&1 &
      spid=$!
      pids+=("$spid")
      ok=0
      for _ in $(seq 100); do
        if timeout ${rs_timeout:-240} $prog "${client_at[@]}" -p $port "$@" >"$clog" 2>&1; then ok=1; break; fi
        # Nobody listens yet: rconnect (or, non-blocking, rpoll) says so.
        grep -qE '^(rconnect|rpoll): Connection refused' "$clog" || break
        sleep 0.1
      done
      [ $ok = 1 ] || fail "$prog client $*: $(cat "$clog")"
      wait "$spid" || fail "$prog server $* (rc $?): $(cat "$slog")"
      # Result lines (name, size, transfers, iterations, total, time, Gb/sec,
      # usec/xfer): one for a custom run, 8 for the default one.
      local want=1 pat='^custom +'
      [ $# -eq 0 ] && want=8 pat='^[0-9]+[kmg]?_(lat|bw) +'
      for f in "$clog" "$slog"; do
        [ "$(grep -cE "$pat[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+s" "$f")" -eq $want ] ||
          fail "$prog $* printed: $(cat "$f")"
      done
      echo "$prog ${client_at[*]} $*:"; tail -n $want "$clog"
      rm -f "$slog" "$clog"
    }
    rstream_pair "${opts[@]}"
    if [ -n "${gid:-}" ]; then rstream_pair -T a -T v -C 100 -S 100000; fi
    # Transfers larger than the receive buffer (each 4 MB one crosses it
    # several times), checked.
    if [ "$scenario" = rstream-verify ]; then rstream_pair -T v -C 10 -S 4194304; fi
    if [ "$scenario" = riostream ]; then
      rstream_pair -T a -T v -C 100 -S 1000000
      rstream_pair -T b -T v -C 1000 -S 10000
      # 0.2 s each when it works; a stall is for good.
      rs_timeout=30
      for _ in 1 2 3 4 5; do rstream_pair; done
    fi
    ;;
  udpong|udpong-v6)
    # udpong's server serves until killed (its default address is
    # getaddrinfo's loopback, ::1 first, hence -b); the client logs in, over
    # UDP until it has the server's QPN and then over UD, and prints one
    # result line. It logs in again each second until answered, so a server
    # not bound yet only slows it.
    addr=127.0.0.1
    [ "$scenario" = udpong-v6 ] && addr=::1
    udpong_pair() {
      slog=$(mktemp) clog=$(mktemp)
      timeout 120 stdbuf -oL udpong -b $addr -p $port "$@" >"$slog" 2>&1 &
      spid=$!
      pids+=("$spid")
      sleep 0.2
      timeout 60 udpong -s $addr -p $port "$@" >"$clog" 2>&1 || fail "udpong client $* (rc $?): $(cat "$clog")"
      kill -0 "$spid" 2>/dev/null || fail "udpong server $* exited: $(cat "$slog")"
      kill -TERM "$spid"
      wait "$spid" 2>/dev/null || true
      grep -qE '^custom +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+[kmg]? +[0-9.]+s' "$clog" || fail "udpong client $*: $(cat "$clog")"
      # The bandwidth run's count is the server's: datagrams did arrive.
      grep -qE '^custom +[0-9.]+[kmg]? +0 ' "$clog" && fail "udpong $*: the server received nothing"
      grep -qx "client login from $addr" "$slog" || fail "udpong server $*: $(cat "$slog")"
      echo "udpong $*: $(grep '^custom' "$clog")"
      rm -f "$slog" "$clog"
      port=$((port + 1))
    }
    udpong_pair -T e -C 1000 -S 64
    udpong_pair -T e -C 1000 -S 1536
    udpong_pair -T a -T e -C 1000 -S 1000
    udpong_pair -T b -T e -C 1000 -S 1536
    udpong_pair -C 20000 -S 1536
    ;;
  rstream-server-killed)
    slog=$(mktemp) clog=$(mktemp)
    rstream -p $port -T b -C 100000000 -S 100 >"$slog" 2>&1 &
    spid=$!
    pids+=("$spid")
    sleep 0.3
    timeout 60 rstream -s 127.0.0.1 -p $port -T b -C 100000000 -S 100 >"$clog" 2>&1 &
    cpid=$!
    pids+=("$cpid")
    sleep 1.5  # connected and transferring (an endless count)
    kill -0 "$cpid" || fail "the client ended before the kill: $(cat "$clog")"
    kill -KILL "$spid"
    wait "$spid" 2>/dev/null || true
    start=$(date +%s%N)
    for _ in $(seq 40); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.05; done
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    kill -0 "$cpid" 2>/dev/null && fail "the client still runs ${ms} ms after its server was killed: $(cat "$clog")"
    wait "$cpid" && fail "the client exited 0 with its server killed: $(cat "$clog")"
    grep -qE '^(rsend|rrecv)' "$clog" || fail "the client did not fail in rsend/rrecv: $(cat "$clog")"
    echo "rstream server killed: the client's $(grep -oE '^(rsend|rrecv): .*' "$clog" | head -1), exit within $ms ms"
    rm -f "$slog" "$clog"
    ;;
  rspreload)
    echo_bin=$3
    preload=$(ls /usr/lib/*/rsocket/librspreload.so 2>/dev/null | head -1)
    [ -n "$preload" ] || { echo "librspreload.so is not installed (librdmacm1)"; exit 77; }
    slog=$(mktemp) clog=$(mktemp)
    LD_PRELOAD=$preload timeout 60 "$echo_bin" server 127.0.0.1 $port >"$slog" 2>&1 &
    spid=$!
    pids+=("$spid")
    for _ in $(seq 100); do grep -q 'listening' "$slog" && break; sleep 0.05; done
    grep -q 'listening (rsocket 1)' "$slog" || fail "server: $(cat "$slog")"
    [ -z "$(ss -Hltn "( sport = :$port )" 2>/dev/null)" ] || fail "a kernel TCP socket listens on $port"
    LD_PRELOAD=$preload timeout 60 "$echo_bin" client 127.0.0.1 $port 5000000 >"$clog" 2>&1 || fail "client: $(cat "$clog")"
    wait "$spid" || fail "server (rc $?): $(cat "$slog")"
    grep -q 'verified (rsocket 1)' "$clog" || fail "client: $(cat "$clog")"
    grep -q 'echoed 5000000 bytes (rsocket 1)' "$slog" || fail "server: $(cat "$slog")"
    echo "librspreload: a plain TCP echo pair moved 5 MB over rsockets"
    cat "$clog"
    rm -f "$slog" "$clog"
    ;;
  rstream-no-listener)
    clog=$(mktemp)
    start=$(date +%s%N)
    if timeout 30 rstream -s 127.0.0.1 -p $port -C 1 -S 100 >"$clog" 2>&1; then fail "rstream connected to nobody: $(cat "$clog")"; fi
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    grep -qE '^(rconnect|rpoll): Connection refused' "$clog" || fail "expected ECONNREFUSED: $(cat "$clog")"
    [ $ms -lt 5000 ] || fail "the refusal took $ms ms"
    # Blocking too: rconnect itself fails.
    if timeout 30 rstream -s 127.0.0.1 -p $port -C 1 -S 100 -T b >"$clog" 2>&1; then fail "rstream -T b connected to nobody"; fi
    grep -q '^rconnect: Connection refused' "$clog" || fail "expected ECONNREFUSED from rconnect: $(cat "$clog")"
    echo "rstream to a port with no listener: ECONNREFUSED (non-blocking through rpoll, blocking from rconnect) in $ms ms"
    rm -f "$clog"
    ;;
  *)
    echo "unknown scenario $scenario" >&2
    exit 2
    ;;
esac
