#!/usr/bin/env bash
# Conformance: softverbs' libibumad.so.3 is a drop-in for Debian 12's.
#
# Usage: umad_abi.sh LIBDIR     (LIBDIR holds our libibumad.so.3)
#
# 1. Exports: exactly the symbol versions of Debian's libibumad3 44.0
#    (data/exports-libibumad.so.3.txt) and its version nodes
#    (data/version-nodes-libibumad.so.3.txt); against the installed
#    Debian library too when there is one.
# 2. Binding: every consumer is linked with BIND_NOW, so `ldd -r` with LIBDIR
#    first must show no undefined symbol or missing version, and must
#    resolve libibumad.so.3 to ours: infiniband-diags, opensm and its
#    libosmvendor.
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 LIBDIR" >&2
  exit 2
fi
libdir=$(realpath "$1")
lib="$libdir/libibumad.so.3"
data="$(dirname "$(realpath "$0")")/data"
debian_lib=/usr/lib/x86_64-linux-gnu/libibumad.so.3

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
[ -e "$lib" ] || { echo "FAIL: $lib does not exist (build the ibumad target)" >&2; exit 1; }
ours_real=$(realpath "$lib")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "name@@VER TYPE" per exported symbol version, sorted.
exports_of() {
  nm -D --with-symbol-versions --defined-only "$1" | awk '$2 != "A" { print $3 }' | sort -u >"$tmp/nm.txt"
  objdump -T "$1" | awk '
    / \*UND\*/ || / \*ABS\*/ || !/^[0-9a-f]+ / { next }
    { name = $NF; ver = $(NF - 1); gsub(/[()]/, "", ver)
      type = ($0 ~ / D?F /) ? "FUNC" : ($0 ~ / D?O /) ? "OBJECT" : "OTHER"; print name "@" ver, type }' |
    sort -u >"$tmp/types.txt"
  awk 'NR == FNR { type[$1] = $2; next }
       { key = $1; sub(/@@/, "@", key); print $1, (key in type ? type[key] : "UNKNOWN") }' \
    "$tmp/types.txt" "$tmp/nm.txt" | LC_ALL=C sort
}
version_nodes_of() {
  readelf -V -W "$1" | awk '
    /^Version definition section/ { d = 1; next }
    /^Version (needs|symbols) section/ { d = 0 }
    !d { next }
    /Flags: BASE/ { next }
    / Name: / { if (n != "") print n, "parent=" (p == "" ? "-" : p); n = $NF; p = ""; next }
    / Parent 1: / { p = $NF }
    END { if (n != "") print n, "parent=" (p == "" ? "-" : p) }' | LC_ALL=C sort
}
check_against() {  # LABEL EXPORTS NODES
  if ! diff -u "$2" "$tmp/ours.txt" >"$tmp/d"; then fail "$1: exports differ (- Debian, + ours)"; cat "$tmp/d" >&2; fi
  if ! diff -u "$3" "$tmp/ours_nodes.txt" >"$tmp/d"; then fail "$1: version nodes differ"; cat "$tmp/d" >&2; fi
}

exports_of "$lib" >"$tmp/ours.txt"
version_nodes_of "$lib" >"$tmp/ours_nodes.txt"
grep -v '^#' "$data/exports-libibumad.so.3.txt" | grep . | LC_ALL=C sort >"$tmp/expected.txt"
grep -v '^#' "$data/version-nodes-libibumad.so.3.txt" | grep . | LC_ALL=C sort >"$tmp/expected_nodes.txt"
check_against "recorded data" "$tmp/expected.txt" "$tmp/expected_nodes.txt"
if [ -e "$debian_lib" ] && [ "$(realpath "$debian_lib")" != "$ours_real" ]; then
  exports_of "$debian_lib" >"$tmp/debian.txt"
  version_nodes_of "$debian_lib" >"$tmp/debian_nodes.txt"
  check_against "$debian_lib" "$tmp/debian.txt" "$tmp/debian_nodes.txt"
fi
echo "exports: ours $(wc -l <"$tmp/ours.txt"), Debian $(wc -l <"$tmp/expected.txt")"

consumers=(ibstat ibaddr smpquery perfquery ibnetdiscover iblinkinfo ibroute ibtracert ibqueryerrors
           saquery sminfo smpdump ibportstate ibsysstat ibping)
checked=0
for name in "${consumers[@]}" opensm /usr/lib/x86_64-linux-gnu/libosmvendor.so.5; do
  prog=$name
  [ "${name#/}" != "$name" ] || prog=$(command -v "$name" || PATH=/usr/sbin:/sbin:$PATH command -v "$name")
  if [ -z "$prog" ] || [ ! -e "$prog" ]; then
    fail "$name is not installed (scripts/deps.sh installs infiniband-diags and opensm)"
    continue
  fi
  out=$(LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd -r "$prog" 2>&1)
  rc=$?
  checked=$((checked + 1))
  bad=$(grep -E 'undefined symbol|version .* not found|=> not found|symbol lookup error' <<<"$out")
  if [ $rc -ne 0 ] || [ -n "$bad" ]; then
    fail "ldd -r $prog (rc $rc):"
    sed 's/^/    /' <<<"${bad:-$out}" >&2
  fi
  resolved=$(awk '$1 == "libibumad.so.3" && $2 == "=>" { print $3 }' <<<"$out")
  if [ -z "$resolved" ] || [ "$(realpath "$resolved")" != "$ours_real" ]; then
    fail "$prog: libibumad.so.3 resolved to '${resolved}', not ours ($lib)"
  fi
done
echo "ldd -r: $checked programs"

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "PASS"
