# Sourced by the QoS scripts (qos_arbitration.sh, qos_vl15.sh) after `lib`
# is set: softverbs0 on a paced 4X SDR link in a device segment of its own
# (`. paced_link.sh NAME`), a work directory in $work, and the background
# PIDs in $pids, sent TERM, then KILL, and removed with the rest at exit.
# Needs ports.sh.
export LD_LIBRARY_PATH=$lib
export SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-conf-$1-$$
export SOFTVERBS_LINK=4xSDR SOFTVERBS_LINK_PACING=1
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  # The device and what sits beside it: sysfs tree, PMA reset point, an SM's issm FIFO and agents.
  rm -rf "$SOFTVERBS_DEVICE_PATH" "$SOFTVERBS_DEVICE_PATH".* "$work"
}
trap cleanup EXIT

# pair NAME SL TOOL OPTIONS...: a server and a client of TOOL on softverbs0
# (OPTIONS name the SL; SL only spreads the ports), in the background; the
# client retries only a rendezvous the server was not yet listening for.
# Their output: $work/NAME.server, $work/NAME.client.
pair() {
  local name=$1 sl=$2 tool=$3 port
  shift 3
  port=$(free_tcp_port $(( 18000 + sl * 11 + ${#name} )))
  timeout 90 "$tool" -d softverbs0 -p "$port" "$@" >"$work/$name.server" 2>&1 &
  pids+=($!)
  (
    for _ in $(seq 100); do
      rc=0
      timeout 90 "$tool" -d softverbs0 -p "$port" "$@" localhost >"$work/$name.client" 2>&1 || rc=$?
      if [ $rc -ne 0 ] && grep -q "Couldn't connect" "$work/$name.client"; then sleep 0.1; else exit $rc; fi
    done
    exit 1
  ) &
  pids+=($!)
}
