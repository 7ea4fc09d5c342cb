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
  *)
    echo "unknown scenario $scenario" >&2
    exit 2
    ;;
esac
