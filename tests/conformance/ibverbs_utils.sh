#!/usr/bin/env bash
# Debian's own ibverbs-utils, unmodified, on softverbs through LD_LIBRARY_PATH.
# Usage: ibverbs_utils.sh <dir of our libibverbs.so.1> <scenario>
set -euo pipefail
libdir=$1
scenario=$2
export LD_LIBRARY_PATH=$libdir
export SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-conf-$scenario-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$SOFTVERBS_DEVICE_PATH" "$SOFTVERBS_DEVICE_PATH.sysfs"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A TCP port for the pingpong rendezvous that nothing else uses.
. "$(dirname "$0")/ports.sh"
port=$(free_tcp_port 12000)

# What a pingpong prints when it passed (ibv_xsrq_pingpong: "success").
done_word="iters in"

pingpong() {  # pingpong <program> <args...>: server and client, both must pass
  local prog=$1; shift
  local log
  log=$(mktemp)
  timeout 120 "$prog" -d softverbs0 -p "$port" "$@" >"$log" 2>&1 &
  local spid=$!
  pids+=("$spid")
  local out
  for _ in $(seq 50); do
    out=$(timeout 120 "$prog" -d softverbs0 -p "$port" "$@" localhost 2>&1) && break
    # The server may not listen yet: retry the rendezvous only, never a failed run.
    grep -q "Couldn't connect" <<<"$out" || break
    sleep 0.1
  done
  echo "client: $out" | tail -2
  wait "$spid" || fail "$prog $* server failed: $(cat "$log")"
  grep -q "$done_word" <<<"$out" || fail "$prog $* client failed: $out"
  grep -q "$done_word" "$log" || fail "$prog $* server printed no result: $(cat "$log")"
  rm -f "$log"
  port=$((port + 1))
}

# ibv_xsrq_pingpong's server with several clients (-c): xsrq_clients <n> <args...>.
# The server's XRC_SEND QP to one client's XRC_RECV QP names another
# client's SRQ on alternate messages: one process's QP delivers into another
# process's SRQ of the domain they share (/tmp/xrc_domain).
xsrq_clients() {
  local n=$1; shift
  local slog
  slog=$(mktemp)
  timeout 120 ibv_xsrq_pingpong -d softverbs0 -p "$port" -c "$n" "$@" >"$slog" 2>&1 &
  local spid=$!
  pids+=("$spid")
  local logs=() cpids=() i
  for i in $(seq "$n"); do
    logs+=("$(mktemp)")
    (
      for _ in $(seq 50); do
        timeout 120 ibv_xsrq_pingpong -d softverbs0 -p "$port" "$@" localhost >"${logs[-1]}" 2>&1 && exit 0
        # The server may not listen yet: retry the rendezvous only, never a failed run.
        grep -q "Couldn't connect" "${logs[-1]}" || exit 1
        sleep 0.1
      done
      exit 1
    ) &
    cpids+=("$!")
    pids+=("$!")
  done
  for i in "${!cpids[@]}"; do
    wait "${cpids[$i]}" || fail "ibv_xsrq_pingpong -c $n $* client $i failed: $(cat "${logs[$i]}")"
    grep -q success "${logs[$i]}" || fail "client $i printed no result: $(cat "${logs[$i]}")"
  done
  wait "$spid" || fail "ibv_xsrq_pingpong -c $n $* server failed: $(cat "$slog")"
  grep -q success "$slog" || fail "ibv_xsrq_pingpong -c $n server printed no result: $(cat "$slog")"
  echo "ibv_xsrq_pingpong -c $n $*: server and $n clients: success"
  rm -f "$slog" "${logs[@]}"
  port=$((port + 1))
}

case $scenario in
  devices)
    out=$(ibv_devices) || fail "ibv_devices: $out"
    echo "$out"
    grep -Eq "softverbs0[[:space:]]+[0-9a-f]{16}" <<<"$out" || fail "ibv_devices does not list softverbs0 with a GUID"
    ;;
  devinfo)
    out=$(ibv_devinfo -v) || fail "ibv_devinfo -v: $out"
    # Not `echo | head`: head leaves early, and pipefail would fail the test on echo's SIGPIPE.
    head -20 <<<"$out"
    for want in "hca_id:[[:space:]]softverbs0" "state:[[:space:]]+PORT_ACTIVE" "active_mtu:[[:space:]]+4096" \
                "link_layer:[[:space:]]+InfiniBand" "atomic_cap:[[:space:]]+ATOMIC_HCA" "GID\[  0\]:[[:space:]]+fe80:0000:0000:0000"; do
      grep -Eq "$want" <<<"$out" || fail "ibv_devinfo -v lacks /$want/"
    done
    lid=$(sed -nE 's/.*port_lid:[[:space:]]+([0-9]+).*/\1/p' <<<"$out")
    [ "${lid:-0}" -gt 0 ] || fail "port LID is not assigned"
    guid=$(sed -nE 's/.*node_guid:[[:space:]]+([0-9a-f:]+).*/\1/p' <<<"$out" | tr -d :)
    grep -q "${guid:8:8}" <<<"$(sed -n 's/.*GID\[  0\]:[[:space:]]*//p' <<<"$out" | tr -d :)" ||
      true  # GID 0 is built from the port GUID, which need not equal the node GUID
    ibv_devinfo -d softverbs0 -i 1 >/dev/null || fail "ibv_devinfo -d -i"
    ;;
  # 10 000 round trips of the small messages; 1000 of the large ones, which
  # still go twice round rc_pingpong's 500-deep receive queue (10 000 of
  # 1 MiB each way took half a minute of copying on a loaded 2-core machine).
  rc_pingpong_lid)
    for size in 1 64 4096; do pingpong ibv_rc_pingpong -s "$size" -n 10000; done
    for size in 65536 1048576; do pingpong ibv_rc_pingpong -s "$size" -n 1000; done
    ;;
  rc_pingpong_gid)
    for size in 1 4096; do pingpong ibv_rc_pingpong -g 0 -s "$size" -n 10000; done
    pingpong ibv_rc_pingpong -g 0 -s 1048576 -n 1000
    ;;
  rc_pingpong_events)
    pingpong ibv_rc_pingpong -e -n 2000
    pingpong ibv_rc_pingpong -e -g 0 -s 65536 -n 2000
    ;;
  rc_pingpong_paths)
    for path in map cma bounce; do SOFTVERBS_HOST_PATH=$path pingpong ibv_rc_pingpong -s 100000 -n 2000; done
    ;;
  uc_pingpong)
    for size in 1 4096 65536; do pingpong ibv_uc_pingpong -s "$size" -n 2000 -c; done
    pingpong ibv_uc_pingpong -g 0 -s 4096 -n 2000 -c
    ;;
  ud_pingpong)
    # UD messages are one MTU at most (the port's: 4096).
    for size in 1 1024 4096; do pingpong ibv_ud_pingpong -s "$size" -n 2000 -c; done
    pingpong ibv_ud_pingpong -g 0 -s 2048 -n 2000 -c
    pingpong ibv_ud_pingpong -e -n 1000
    ;;
  srq_pingpong)
    # 16 RC QPs (ibv_srq_pingpong's default) on one SRQ per side; -c checks the data.
    for size in 1 4096 65536; do pingpong ibv_srq_pingpong -s "$size" -n 500 -c; done
    pingpong ibv_srq_pingpong -q 4 -r 64 -g 0 -s 4096 -n 2000 -c
    ;;
  srq_pingpong_events)
    pingpong ibv_srq_pingpong -e -n 1000
    pingpong ibv_srq_pingpong -e -s 65536 -n 300 -c
    ;;
  xsrq_pingpong)
    # XRC: each end sends on an XRC_SEND QP to the peer's XRC_RECV QP, naming
    # the peer's XRC SRQ. Both processes open the XRC domain through
    # /tmp/xrc_domain, so on one device they share it. It checks no data.
    done_word=success
    for size in 1 4096 65536; do pingpong ibv_xsrq_pingpong -s "$size" -n 500; done
    pingpong ibv_xsrq_pingpong -g 0 -n 500
    pingpong ibv_xsrq_pingpong -e -n 300
    xsrq_clients 2 -n 300
    xsrq_clients 3 -s 100 -n 200
    ;;
  *) fail "unknown scenario $scenario" ;;
esac
echo "PASS: $scenario"
