#!/usr/bin/env bash
# Conformance: our libibumad.so.3 names classes, methods, attributes and
# statuses (umad_class_str & co.) exactly as Debian's does, typos included
# (tools print these names).
#   umad_strings.sh <umad_strings_dump> <our libibumad.so.3>
set -euo pipefail
dump=$1
ours=$2
debian=/usr/lib/x86_64-linux-gnu/libibumad.so.3
[ -e "$debian" ] || { echo "SKIP: Debian's libibumad3 is not installed (scripts/deps.sh)"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$dump" "$debian" > "$work/debian.txt"
"$dump" "$ours" > "$work/ours.txt"
if ! diff -u "$work/debian.txt" "$work/ours.txt" > "$work/diff.txt"; then
  head -n 40 "$work/diff.txt"
  echo "FAIL: $(grep -c '^-[a-z]' "$work/diff.txt") names differ from Debian's"
  exit 1
fi
echo "PASS: $(wc -l < "$work/ours.txt") names, all as Debian's libibumad.so.3 gives them"
