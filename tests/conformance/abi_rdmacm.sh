#!/usr/bin/env bash
# Conformance: softverbs' librdmacm.so.1 is a drop-in for Debian 12's.
#
# Usage: abi_rdmacm.sh LIBDIR     (LIBDIR holds our librdmacm.so.1 and libibverbs.so.1)
#
# 1. Exports. Every symbol version Debian's librdmacm1 44.0 exports
#    (data/exports-librdmacm.so.1.txt) is exported by ours, default (@@),
#    as a function, and ours exports nothing else; the version nodes and
#    their parent chain match data/version-nodes-librdmacm.so.1.txt.
# 2. Binding. Every consumer is linked BIND_NOW: with LIBDIR first on
#    LD_LIBRARY_PATH, `ldd -r` of rdmacm-utils, perftest, libfabric, UCX's
#    libuct_rdmacm, pyverbs' cmid module and librspreload shows no undefined
#    symbol or missing version, and librdmacm.so.1 resolves to ours.
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 LIBDIR" >&2
  exit 2
fi
libdir=$(realpath "$1")
lib="$libdir/librdmacm.so.1"
data="$(dirname "$(realpath "$0")")/data"
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
[ -e "$lib" ] || { echo "FAIL: $lib does not exist (build the rdmacm target first)" >&2; exit 1; }
ours_real=$(realpath "$lib")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "name@@VER TYPE" per exported definition, from objdump -T (a default
# version is the one objdump prints without parentheses).
objdump -T "$lib" | awk '
  / \*UND\*/ || / \*ABS\*/ || !/^[0-9a-f]+ / { next }
  {
    name = $NF; ver = $(NF - 1); sep = "@@"
    if (ver ~ /^\(/) { sep = "@"; gsub(/[()]/, "", ver) }
    type = ($0 ~ / D?F /) ? "FUNC" : ($0 ~ / D?O /) ? "OBJECT" : "OTHER"
    print name sep ver, type
  }' | LC_ALL=C sort -u >"$tmp/ours.txt"
grep -v '^#' "$data/exports-librdmacm.so.1.txt" | grep . | LC_ALL=C sort >"$tmp/expected.txt"
while read -r line; do fail "missing export: $line"; done < <(LC_ALL=C comm -23 "$tmp/expected.txt" "$tmp/ours.txt")
while read -r line; do fail "exports $line, which Debian does not"; done < <(LC_ALL=C comm -13 "$tmp/expected.txt" "$tmp/ours.txt")
echo "exports: ours $(wc -l <"$tmp/ours.txt"), Debian data $(wc -l <"$tmp/expected.txt")"

readelf -V -W "$lib" | awk '
  /^Version definition section/ { in_defs = 1; next }
  /^Version (needs|symbols) section/ { in_defs = 0 }
  !in_defs { next }
  /Flags: BASE/ { next }
  / Name: / { if (node != "") print node, "parent=" (parent == "" ? "-" : parent)
              node = $NF; parent = ""; next }
  / Parent 1: / { parent = $NF }
  END { if (node != "") print node, "parent=" (parent == "" ? "-" : parent) }' | LC_ALL=C sort >"$tmp/nodes.txt"
grep -v '^#' "$data/version-nodes-librdmacm.so.1.txt" | awk 'NF { print $1, $2 }' | LC_ALL=C sort >"$tmp/expected_nodes.txt"
if ! diff -u "$tmp/expected_nodes.txt" "$tmp/nodes.txt" >&2; then
  fail "version nodes differ from Debian's (- Debian, + ours)"
fi

consumers=()
for pkg in rdmacm-utils perftest; do
  files=$(dpkg -L "$pkg" 2>/dev/null) || { fail "package $pkg is not installed (scripts/deps.sh installs it)"; continue; }
  while read -r f; do
    [ -f "$f" ] && [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] && consumers+=("$f")
  done < <(grep '/bin/' <<<"$files")
done
multiarch=/usr/lib/x86_64-linux-gnu
for f in "$multiarch/libfabric.so.1" "$multiarch/ucx/libuct_rdmacm.so.0" "$multiarch/rsocket/librspreload.so" \
         /usr/lib/python3/dist-packages/pyverbs/cmid.cpython-*-x86_64-linux-gnu.so; do
  if [ -e "$f" ]; then consumers+=("$f"); else fail "consumer $f is not installed (scripts/deps.sh)"; fi
done
for f in "${consumers[@]}"; do
  out=$(LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd -r "$f" 2>&1)
  rc=$?
  bad=$(grep -E 'undefined symbol|version .* not found|=> not found|symbol lookup error' <<<"$out")
  if [ $rc -ne 0 ] || [ -n "$bad" ]; then
    fail "ldd -r $f (rc $rc):"
    sed 's/^/    /' <<<"${bad:-$out}" >&2
  fi
  resolved=$(awk '$1 == "librdmacm.so.1" && $2 == "=>" { print $3 }' <<<"$out")
  if [ -n "$resolved" ] && [ "$(realpath "$resolved")" != "$ours_real" ]; then
    fail "$f: librdmacm.so.1 resolved to $resolved, not ours"
  fi
done
echo "ldd -r: ${#consumers[@]} consumers"

if [ $failures -ne 0 ]; then
  echo "abi_rdmacm: $failures failure(s)" >&2
  exit 1
fi
echo "abi_rdmacm: OK"
