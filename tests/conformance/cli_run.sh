#!/usr/bin/env bash
# The CLI: `softverbs run` only sets the environment (and never needs our
# libibverbs itself); `softverbs demo` passes on every host path, fails fast
# without softverbs' library, and leaves no process behind.
# Usage: cli_run.sh <dir holding softverbs and softverbs-demo> <scenario>
. "$(dirname "$0")/ports.sh"
set -euo pipefail
bindir=$(cd "$1" && pwd)
scenario=$2
sv=$bindir/softverbs
libdir=$(cd "$bindir/../lib" && pwd)
export SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-cli-$scenario-$$
cleanup() { rm -rf "$SOFTVERBS_DEVICE_PATH" "$SOFTVERBS_DEVICE_PATH.sysfs"; }
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# Processes still carrying this test's device path in their environment.
leftovers() {
  local p
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = "$$" ] && continue
    grep -qzx "SOFTVERBS_DEVICE_PATH=$SOFTVERBS_DEVICE_PATH" "$p/environ" 2>/dev/null && echo "${p#/proc/}"
  done || true
}

demo() {  # demo <host path>
  local out rc=0 start end
  start=$(date +%s)
  out=$(timeout 90 "$sv" demo --host-path "$1" --iters 300 --size 256K 2>&1) || rc=$?
  end=$(date +%s)
  echo "$out"
  [ "$rc" -eq 0 ] || fail "softverbs demo --host-path $1 exited $rc"
  grep -q "^demo: all checks passed$" <<<"$out" || fail "no 'all checks passed' line"
  for step in connect SEND SEND+IMM "RDMA WRITE" WRITE+IMM "RDMA READ" ATOMIC latency bandwidth "message rate" teardown; do
    grep -q "^$step " <<<"$out" || fail "step '$step' missing from the output"
  done
  [ $((end - start)) -lt 30 ] || fail "the demo took $((end - start)) s"
  [ -z "$(leftovers)" ] || fail "processes left behind: $(leftovers)"
}

case $scenario in
  env)
    readelf -d "$sv" | grep -q 'NEEDED.*libibverbs' && fail "softverbs itself links libibverbs"
    out=$(env -u LD_LIBRARY_PATH "$sv" run -- env)
    grep -qx "LD_LIBRARY_PATH=$libdir" <<<"$out" || fail "LD_LIBRARY_PATH is not $libdir: $(grep LD_LIB <<<"$out")"
    out=$(LD_LIBRARY_PATH=/x:/y "$sv" run --device-path /dev/shm/sv-f --host-path bounce -- env)
    grep -qx "LD_LIBRARY_PATH=$libdir:/x:/y" <<<"$out" || fail "existing LD_LIBRARY_PATH not kept after ours"
    grep -qx "SOFTVERBS_DEVICE_PATH=/dev/shm/sv-f" <<<"$out" || fail "--device-path not exported"
    grep -qx "SOFTVERBS_HOST_PATH=bounce" <<<"$out" || fail "--host-path not exported"
    # Arguments pass through untouched, options included; the exit code is the program's.
    rc=0; out=$("$sv" run -- sh -c 'echo "$*"; exit 7' sh --host-path map -- -x) || rc=$?
    [ "$rc" -eq 7 ] || fail "exit code $rc, expected 7"
    [ "$out" = "--host-path map -- -x" ] || fail "arguments changed: '$out'"
    rc=0; "$sv" run -- softverbs-no-such-program 2>/dev/null || rc=$?
    [ "$rc" -eq 127 ] || fail "missing program: exit $rc, expected 127"
    rc=0; "$sv" run --host-path fast -- true 2>/dev/null || rc=$?
    [ "$rc" -eq 2 ] || fail "bad --host-path: exit $rc, expected 2"
    rc=0; "$sv" run 2>/dev/null || rc=$?
    [ "$rc" -eq 2 ] || fail "no program: exit $rc, expected 2"
    echo "run: environment, arguments and exit codes as documented"
    ;;
  equivalence)
    # `softverbs run X` and `LD_LIBRARY_PATH=<lib> X` see the same device.
    a=$("$sv" run -- ibv_devinfo -v) || fail "softverbs run -- ibv_devinfo: $a"
    b=$(LD_LIBRARY_PATH=$libdir ibv_devinfo -v) || fail "LD_LIBRARY_PATH=$libdir ibv_devinfo: $b"
    grep -q "hca_id:[[:space:]]softverbs0" <<<"$a" || fail "softverbs run -- ibv_devinfo shows no softverbs0"
    [ "$a" = "$b" ] || fail "outputs differ: $(diff <(echo "$a") <(echo "$b") | head)"
    echo "run: same ibv_devinfo -v output as LD_LIBRARY_PATH=$libdir"
    ;;
  nolib)
    # Debian's libibverbs first: the demo must say so quickly, not hang.
    rc=0; start=$(date +%s)
    out=$(LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu timeout 30 "$bindir/softverbs-demo" 2>&1) || rc=$?
    echo "$out"
    [ "$rc" -eq 1 ] || fail "exit $rc, expected 1"
    grep -q "no softverbs0 device" <<<"$out" || fail "no 'no softverbs0 device' message"
    [ $(($(date +%s) - start)) -lt 5 ] || fail "took too long to fail"
    [ -z "$(leftovers)" ] || fail "processes left behind: $(leftovers)"
    ;;
  status-exited)
    # Regression (issue 18: `softverbs status` listed exited processes as
    # attached): a process killed with its QP open is gone from the list.
    LD_LIBRARY_PATH=$libdir timeout 30 ibv_rc_pingpong -d softverbs0 -p $(free_tcp_port 20000) >/dev/null 2>&1 &
    victim=$!
    # `timeout` is the child; the pingpong is its child.
    for _ in $(seq 100); do
      pp=$(pgrep -P "$victim" ibv_rc_pingpong || true)
      [ -n "$pp" ] && "$sv" status --json | grep -q "\"pid\": $pp" && break
      sleep 0.1
    done
    [ -n "$pp" ] || fail "ibv_rc_pingpong did not start"
    "$sv" status | grep -q "processes: 1 attached" || fail "the live process is not listed: $("$sv" status)"
    kill -KILL "$pp"
    wait "$victim" 2>/dev/null || true
    out=$("$sv" status)
    echo "$out"
    grep -q "processes: 0 attached" <<<"$out" || fail "an exited process is still listed as attached"
    ! grep -q "pid $pp" <<<"$out" || fail "the exited process or its QP is still listed"
    ;;
  dev-nodes)
    # `softverbs run --dev-nodes`: the /dev/infiniband stand-ins UCX checks
    # for exist for the program, as a user without privileges too, and the
    # host's /dev is left alone.
    "$sv" run --dev-nodes -- true 2>/dev/null ||
      { echo "SKIP: softverbs run --dev-nodes is not permitted here (no mount namespaces)"; exit 77; }
    before=$(ls -A /dev/infiniband 2>/dev/null || true)
    for who in self nobody; do
      prefix=()
      if [ "$who" = nobody ]; then
        [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null || continue
        prefix=(setpriv --reuid=65534 --regid=65534 --clear-groups)
      fi
      out=$("${prefix[@]}" "$sv" run --dev-nodes -- stat -c '%F %t:%T %n' \
              /dev/infiniband/uverbs_softverbs0 /dev/infiniband/uverbs_softverbs_roce0 /dev/null 2>&1) ||
        fail "$who: softverbs run --dev-nodes: $out"
      echo "$who: $out"
      [ "$(grep -c '^character special file 1:3 /dev/infiniband/uverbs_softverbs' <<<"$out")" -eq 2 ] ||
        fail "$who: the nodes are not character devices"
      grep -q '^character special file 1:3 /dev/null' <<<"$out" || fail "$who: /dev/null is gone"
    done
    [ "$(ls -A /dev/infiniband 2>/dev/null || true)" = "$before" ] || fail "the host's /dev/infiniband changed"
    ;;
  demo-auto|demo-map|demo-cma|demo-bounce)
    demo "${scenario#demo-}"
    ;;
  *)
    fail "unknown scenario $scenario"
    ;;
esac
