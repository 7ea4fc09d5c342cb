#!/usr/bin/env bash
# Debian's perftest, unmodified, on the host device softverbs0 through our
# libibverbs.so.1: server and client on localhost, both exit 0, and every
# result row the client prints has a non-zero figure.
#   perftest.sh <dir of libibverbs.so.1> <tool> [perftest options...]
# The options go to both ends as given: the caller chooses the count (-n) or
# the duration (-D). SOFTVERBS_PERFTEST_ROCE_PORT=<udp port>: on
# softverbs_roce0 instead, both ends on 127.0.0.1 (perftest's multicast needs
# it: on an InfiniBand port it registers the group with the SM through
# libibumad, whose subnet administrator softverbs0 has not yet).
set -euo pipefail
lib=$1
tool=$2
shift 2
export LD_LIBRARY_PATH=$lib
export SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-conf-pt-$tool-$$
work=$(mktemp -d)
server=
cleanup() {
  if [ -n "$server" ]; then
    # timeout forwards TERM to the tool; KILL only if that did not end it.
    kill -TERM "$server" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$server" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$SOFTVERBS_DEVICE_PATH" "$SOFTVERBS_DEVICE_PATH.sysfs" "$SOFTVERBS_DEVICE_PATH.cm"
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $tool $*" >&2; exit 1; }

command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (Debian package perftest)"; exit 77; }

# A TCP port for the rendezvous that nothing listens on.
. "$(dirname "$0")/ports.sh"
port=$(free_tcp_port 0)
device=softverbs0
if [ -n "${SOFTVERBS_PERFTEST_ROCE_PORT:-}" ]; then
  export SOFTVERBS_ROCE_ADDR=127.0.0.1 SOFTVERBS_ROCE_PORT=$SOFTVERBS_PERFTEST_ROCE_PORT
  device=softverbs_roce0
fi
common=(-d "$device" -p "$port" "$@")

timeout 120 stdbuf -o0 "$tool" "${common[@]}" >"$work/server.out" 2>&1 &
server=$!
# With -R, start the client once the server listens: perftest's client does
# not survive a reject (it goes on with the id it destroyed).
case " $* " in
  *" -R "*)
    for _ in $(seq 200); do
      grep -q 'Waiting for client to connect' "$work/server.out" 2>/dev/null && break
      kill -0 "$server" 2>/dev/null || break
      sleep 0.05
    done
    sleep 0.3
    ;;
esac
# perftest's client does not retry the TCP connect (or, with -R, the RDMA CM
# connect, rejected while nobody listens: REJ reason 8): retry until the
# server listens, but never rerun a client that got further than that.
rc=0
for _ in $(seq 100); do
  rc=0
  timeout 120 "$tool" "${common[@]}" localhost >"$work/client.out" 2>&1 || rc=$?
  if [ $rc -ne 0 ] && grep -qE "Couldn't connect|Unexpected CM event bl blka 8$|RDMA_CM_EVENT_REJECTED; error: 8" "$work/client.out" && kill -0 "$server" 2>/dev/null; then
    sleep 0.1
  else
    break
  fi
done
srv=0
wait "$server" || srv=$?
server=
cat "$work/client.out"
if [ $rc -ne 0 ] || [ $srv -ne 0 ]; then
  echo "--- server"; cat "$work/server.out"
  fail "$*: client exited $rc, server $srv"
fi
# The result rows follow the "#bytes" header up to the closing dashes: size,
# iterations, then figures, of which at least one is non-zero in every row.
rows=$(awk '/#bytes/ {on = 1; next} on && /^[[:space:]]*-+[[:space:]]*$/ {exit} on && NF {print}' "$work/client.out")
[ -n "$rows" ] || fail "$*: no result row"
awk '{ found = 0; for (i = 3; i <= NF; ++i) if ($i + 0 > 0) found = 1; if (!found) { print "zero row: " $0; bad = 1 } }
     END { exit bad }' <<<"$rows" || fail "$*: a result row whose figures are all zero"
echo "PASS: $tool $* ($(wc -l <<<"$rows") result rows)"
