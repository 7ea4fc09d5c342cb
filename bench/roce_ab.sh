#!/usr/bin/env bash
# A/B of RoCE bandwidth between two network namespaces (tests/roce/netns.sh):
# ib_write_bw 64 KiB and 1 MiB through each library directory in turn, round
# after round, then a TCP stream on the same veth (bench/limits/tcp_bw.cc);
# the CPU time of both perftest processes per GB moved, which the machine's
# load moves less than the bandwidth. Medians are left to the reader.
#   bench/roce_ab.sh ROUNDS LIBDIR[@VAR=value]...   (run as root: it makes namespaces)
# A LIBDIR may carry one environment setting for its runs after an @, so one
# build can be its own base (build/lib@SOFTVERBS_ROCE_TLP=0 build/lib).
# Environment: TOOL (ib_write_bw; ib_read_bw, ib_send_bw), FAULTS
# (SOFTVERBS_FAULTS for both sides), SIZES ("65536
# 1048576"), ITERS64 (10000), ITERS1M (640), PTARGS (more perftest options,
# e.g. "-u 8"), NOTCP=1, BUILD (build: its
# bin/sv_bench_tcp_bw), STALLS=1 (both sides log at info; each run then
# counts the requester's local ACK timeouts and tail-loss probes), KEEP=PREFIX
# (keeps each run's perftest output as PREFIX.ROUND.client/.server).
set -u
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 2 ] || { echo "usage: $0 ROUNDS LIBDIR..." >&2; exit 2; }
rounds=$1
shift
tcp_bw=${BUILD:-$here/../build}/bin/sv_bench_tcp_bw
# shellcheck source=tests/roce/netns.sh
. "$here/../tests/roce/netns.sh"
netns_up
work=$(mktemp -d)
trap 'netns_down; rm -rf "$work" /dev/shm/softverbs-roce-ab-$$-*' EXIT
port=$(( 23000 + $$ % 10000 ))
faults=()
[ -n "${FAULTS:-}" ] && faults=(SOFTVERBS_FAULTS="$FAULTS")
for r in $(seq "$rounds"); do
  for arg in "$@"; do
    lib=$(cd "${arg%%@*}" && pwd)
    extra=()
    [ "$arg" != "${arg#*@}" ] && extra+=("${arg#*@}")
    [ -n "${STALLS:-}" ] && extra+=(SOFTVERBS_LOG=info)
    for size in ${SIZES:-65536 1048576}; do
      port=$(( port + 1 ))
      n=$(( size <= 65536 ? ${ITERS64:-10000} : ${ITERS1M:-640} ))
      # shellcheck disable=SC2206 # PTARGS: more perftest options, word-split on purpose
      pt=("${TOOL:-ib_write_bw}" -d softverbs_roce0 -x 0 -p "$port" -F -n "$n" -s "$size" ${PTARGS:-})
      in_a env LD_LIBRARY_PATH="$lib" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-roce-ab-$$-a \
        SOFTVERBS_ROCE_ADDR="$ADDR_A" "${faults[@]}" "${extra[@]}" /usr/bin/time -f "cpu %U %S" -o "$work/server.time" \
        timeout 60 "${pt[@]}" > "$work/server.out" 2>&1 &
      server=$!
      NETNS_PIDS+=("$server")
      wait_listen in_a "$port" "$server" || true
      in_b env LD_LIBRARY_PATH="$lib" SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-roce-ab-$$-b \
        SOFTVERBS_ROCE_ADDR="$ADDR_B" "${faults[@]}" "${extra[@]}" /usr/bin/time -f "cpu %U %S" -o "$work/client.time" \
        timeout 60 "${pt[@]}" "$ADDR_A" > "$work/client.out" 2>&1
      wait "$server"
      # perftest's MB are 2^20 bytes; GB/s here are 10^9 bytes a second.
      bw=$(awk '/^ *[0-9]+ +[0-9]+ +[0-9.]+ +[0-9.]+/ { printf "%.3f", $4 * 1048576 / 1e9 }' "$work/client.out")
      cpu=$(cat "$work/server.time" "$work/client.time" | awk -v b=$(( n * size )) \
        '/^cpu/ { u += $2; k += $3 } END { printf "user %.2f s, sys %.2f s, %.2f CPU s/GB", u, k, (u + k) / (b / 1e9) }')
      stalls=
      [ -n "${STALLS:-}" ] && stalls=", $(cat "$work/server.out" "$work/client.out" | grep -c 'local ACK timeout') ACK timeouts, $(cat "$work/server.out" "$work/client.out" | grep -c 'tail-loss probe') probes"
      echo "round $r $arg $size B: ${bw:-FAILED} GB/s, $cpu$stalls"
      [ -n "$bw" ] || tail -n 5 "$work/client.out" "$work/server.out"
      [ -n "${KEEP:-}" ] && cp "$work/client.out" "$KEEP.$r.client" && cp "$work/server.out" "$KEEP.$r.server"
      rm -rf /dev/shm/softverbs-roce-ab-$$-*
    done
  done
  if [ -z "${NOTCP:-}" ] && [ -x "$tcp_bw" ]; then
    port=$(( port + 1 ))
    in_a "$tcp_bw" server "$ADDR_A" "$port" > /dev/null 2>&1 &
    server=$!
    NETNS_PIDS+=("$server")
    wait_listen in_a "$port" "$server" || true
    echo "round $r TCP stream: $(in_b "$tcp_bw" client "$ADDR_A" "$port" 0.5 | awk '/^result/ { print $2 }') GB/s"
    wait "$server"
  fi
done
