#!/bin/bash
# Runs the wire fuzzer for a bounded time and fails on any finding.
#
#   tests/fuzz/run_fuzz.sh <build-dir> <seconds>
#
# <build-dir> is a clang tree configured with -DSOFTVERBS_FUZZ=ON (wire_fuzzer
# and wire_fuzz_corpus are built here if missing). The seeds are regenerated
# every run; what the fuzzer learns stays in <build-dir>/fuzz/corpus, so the
# next run starts where this one stopped. A crash, leak, timeout or broken
# invariant leaves its input in <build-dir>/fuzz/artifacts and exits 1;
# replay it with: <build-dir>/bin/wire_fuzzer <that file>
set -euo pipefail

if [ $# -ne 2 ] || ! [[ $2 =~ ^[0-9]+$ ]] || [ "$2" -eq 0 ]; then
  echo "usage: $0 <build-dir> <seconds>" >&2
  exit 2
fi
tree=$(cd "$1" && pwd)
seconds=$2

cmake --build "$tree" --target wire_fuzzer responder_fuzzer wire_fuzz_corpus > "$tree/fuzz-build.log" 2>&1 ||
  { cat "$tree/fuzz-build.log"; echo "run_fuzz.sh: the fuzzers do not build" >&2; exit 1; }
work=$tree/fuzz
rm -rf "$work/seed" "$work/seed-responder" "$work/artifacts"
mkdir -p "$work/corpus" "$work/corpus-responder" "$work/artifacts" "$work/seed-responder"
"$tree/bin/wire_fuzz_corpus" "$work/seed"
# The responder fuzzer's inputs are a byte choosing the QP (transport, MTU,
# PSN aligned or not) and an IB packet: every seed packet, for a few QPs.
for f in "$work"/seed/*; do
  for q in 00 80 81 82 84 86; do  # byte % 3: RC, UC, UD; bit 7: PSN aligned
    { printf "\x$q"; cat "$f"; } > "$work/seed-responder/$q-$(basename "$f")"
  done
done

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# The time goes half to the parsers, half to the responder behind them.
# max_len covers a 4096-byte payload with the longest headers in IPv6 framing.
status=0
half=$(( (seconds + 1) / 2 ))
run() {  # run <fuzzer> <corpus> <seeds>
  "$tree/bin/$1" -max_total_time="$half" -max_len=4300 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$work/artifacts/$1-" \
    "$2" "$3" > "$work/$1.log" 2>&1 || status=$?
  echo "--- $1"; tail -n 12 "$work/$1.log"
}
run wire_fuzzer "$work/corpus" "$work/seed"
run responder_fuzzer "$work/corpus-responder" "$work/seed-responder"

findings=$(find "$work/artifacts" -type f | wc -l)
if [ "$status" -ne 0 ] || [ "$findings" -ne 0 ]; then
  echo "run_fuzz.sh: FAILED (exit $status, $findings finding(s) in $work/artifacts; logs $work/*_fuzzer.log)" >&2
  exit 1
fi
echo "run_fuzz.sh: no findings in ${seconds}s ($(find "$work/corpus" "$work/corpus-responder" -type f | wc -l) inputs in the corpora)"
