#!/usr/bin/env bash
# Issue 20: READ responses are paced. The device is a 1X SDR port (2 Gb/s
# of data) with pacing on; a READ's data crosses the link in its READ
# RESPONSE packets, so Debian's ib_read_bw measures the link's rate, within
# 10 %, as ib_write_bw does on the same link (without the responses' time
# a READ request of 44 bytes would let the data through at memory speed).
#   paced_read.sh <dir of libibverbs.so.1 and libibumad.so.3>
# Every tool runs under `timeout`; background processes are killed by PID.
. "$(dirname "$0")/ports.sh"
set -euo pipefail
lib=$1
. "$(dirname "$0")/paced_link.sh" "read"
export SOFTVERBS_LINK=1xSDR
fail() { echo "FAIL: paced_read: $*" >&2; exit 1; }
for tool in ib_read_bw ib_write_bw; do
  command -v $tool >/dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done

# gbps NAME TOOL: a pair of TOOL, 64 KiB messages for 2 s, on SL0; its
# average bandwidth in Gb/s (perftest's --report_gbits: 10^9 bits/s of payload).
gbps() {
  pair "$1" 0 "$2" -s 65536 -D 2 --report_gbits
  for p in "${pids[@]}"; do wait "$p" || { cat "$work/$1.client" >&2; fail "$2 exited $?"; }; done
  pids=()
  awk '$1 == 65536 { print $4 }' "$work/$1.client"
}

read_gbps=$(gbps read ib_read_bw)
write_gbps=$(gbps write ib_write_bw)
echo "1X SDR, paced: ib_read_bw $read_gbps Gb/s, ib_write_bw $write_gbps Gb/s (the link: 2 Gb/s of data)"
python3 - "$read_gbps" "$write_gbps" <<'PY' || fail "not the link's rate"
import sys
for name, v in (("ib_read_bw", float(sys.argv[1])), ("ib_write_bw", float(sys.argv[2]))):
    # The link's 2 Gb/s carry headers too: 64 KiB of payload is 99.4 % of its wire bytes.
    if abs(v - 2.0 * 0.994) > 0.1 * 2.0:
        sys.exit("%s: %.3f Gb/s" % (name, v))
PY
echo "PASS: paced_read"
