#!/usr/bin/env bash
# Conformance: softverbs' libibverbs.so.1 is a drop-in for Debian 12's.
#
# Usage: abi_symbols.sh LIBDIR     (LIBDIR holds our libibverbs.so.1)
#
# 1. Exports. Every symbol version Debian's libibverbs1 44.0 exports
#    (data/exports-libibverbs.so.1.txt, measured with objdump -T and
#    nm -D --with-symbol-versions) is exported by ours with the same
#    default (@@) or compat (@) status and the same type (FUNC/OBJECT), and
#    ours exports nothing else. The version nodes and their parent chain
#    match data/version-nodes-libibverbs.so.1.txt. When Debian's own
#    library is installed, ours is compared against it too.
# 2. Binding. Debian's programs are all linked with BIND_NOW, so one missing
#    symbol kills them before main: `ldd -r` every program of ibverbs-utils,
#    perftest and rdmacm-utils with LIBDIR first on LD_LIBRARY_PATH must show
#    no undefined symbol and no missing version or library, and must resolve
#    libibverbs.so.1 to ours. pyverbs (Debian's python3) must import with
#    our library mapped and Debian's not.
#
# Needs binutils (objdump, nm, readelf), ldd, dpkg and Debian's python3.
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 LIBDIR" >&2
  exit 2
fi
libdir=$(realpath "$1")
lib="$libdir/libibverbs.so.1"
here=$(dirname "$(realpath "$0")")
data="$here/data"
debian_lib=/usr/lib/x86_64-linux-gnu/libibverbs.so.1
python=/usr/bin/python3

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

if [ ! -e "$lib" ]; then
  echo "FAIL: $lib does not exist (build the ibverbs target first)" >&2
  exit 1
fi
ours_real=$(realpath "$lib")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ---- 1. Exports -----------------------------------------------------------

# Prints one line per exported symbol version, "name@@VER TYPE" (default) or
# "name@VER TYPE" (compat), sorted. nm gives the version and its status,
# objdump -T the ELF type; the two are joined on name and version.
exports_of() {
  local so=$1
  nm -D --with-symbol-versions --defined-only "$so" |
    awk '$2 != "A" { print $3 }' | sort -u >"$tmp/nm.txt"
  objdump -T "$so" | awk '
    / \*UND\*/ || / \*ABS\*/ || !/^[0-9a-f]+ / { next }
    {
      name = $NF; ver = $(NF - 1); gsub(/[()]/, "", ver)
      type = ($0 ~ / D?F /) ? "FUNC" : ($0 ~ / D?O /) ? "OBJECT" : "OTHER"
      print name "@" ver, type
    }' | sort -u >"$tmp/types.txt"
  # nm spells a default "name@@VER"; the type table is keyed "name@VER".
  awk 'NR == FNR { type[$1] = $2; next }
       { key = $1; sub(/@@/, "@", key); print $1, (key in type ? type[key] : "UNKNOWN") }' \
    "$tmp/types.txt" "$tmp/nm.txt" | LC_ALL=C sort
}

# Prints "NODE parent=PARENT" for each version definition but the base one.
version_nodes_of() {
  readelf -V -W "$1" | awk '
    /^Version definition section/ { in_defs = 1; next }
    /^Version (needs|symbols) section/ { in_defs = 0 }
    !in_defs { next }
    /Flags: BASE/ { next }
    / Name: / { if (node != "") print node, "parent=" (parent == "" ? "-" : parent)
                node = $NF; parent = ""; next }
    / Parent 1: / { parent = $NF }
    END { if (node != "") print node, "parent=" (parent == "" ? "-" : parent) }'
}

# compare_exports LABEL EXPECTED_FILE ACTUAL_FILE [exact]
compare_exports() {
  local label=$1 expected=$2 actual=$3 exact=${4:-}
  local missing extra
  missing=$(LC_ALL=C comm -23 "$expected" "$actual")
  if [ -n "$missing" ]; then
    while read -r sym type; do
      # Say what we export instead, if the name is there at all.
      local name=${sym%%@*} have
      have=$(awk -v n="$name" '{ s = $1; sub(/@.*/, "", s) } s == n { printf "%s %s; ", $1, $2 }' "$actual")
      fail "$label: missing $sym $type${have:+ (ours: $have)}"
    done <<<"$missing"
  fi
  if [ -n "$exact" ]; then
    extra=$(LC_ALL=C comm -13 "$expected" "$actual")
    if [ -n "$extra" ]; then
      while read -r line; do fail "$label: exports $line, which Debian does not"; done <<<"$extra"
    fi
  fi
}

exports_of "$lib" >"$tmp/ours.txt"
grep -v '^#' "$data/exports-libibverbs.so.1.txt" | grep . | LC_ALL=C sort >"$tmp/expected.txt"
compare_exports "exports vs data" "$tmp/expected.txt" "$tmp/ours.txt" exact
echo "exports: ours $(wc -l <"$tmp/ours.txt"), Debian data $(wc -l <"$tmp/expected.txt")"

version_nodes_of "$lib" | LC_ALL=C sort >"$tmp/ours_nodes.txt"
grep -v '^#' "$data/version-nodes-libibverbs.so.1.txt" | awk 'NF { print $1, $2 }' |
  LC_ALL=C sort >"$tmp/expected_nodes.txt"
if ! diff -u "$tmp/expected_nodes.txt" "$tmp/ours_nodes.txt" >"$tmp/nodes.diff"; then
  fail "version nodes differ from Debian's (- Debian, + ours):"
  cat "$tmp/nodes.diff" >&2
fi

if [ -e "$debian_lib" ] && [ "$(realpath "$debian_lib")" != "$ours_real" ]; then
  exports_of "$debian_lib" >"$tmp/debian.txt"
  compare_exports "exports vs $debian_lib" "$tmp/debian.txt" "$tmp/ours.txt"
  version_nodes_of "$debian_lib" | LC_ALL=C sort >"$tmp/debian_nodes.txt"
  if ! diff -u "$tmp/debian_nodes.txt" "$tmp/ours_nodes.txt" >"$tmp/nodes_live.diff"; then
    fail "version nodes differ from $debian_lib (- Debian, + ours):"
    cat "$tmp/nodes_live.diff" >&2
  fi
  if ! cmp -s "$tmp/debian.txt" "$tmp/expected.txt"; then
    echo "note: $debian_lib differs from the recorded Debian 12 data:" >&2
    LC_ALL=C diff "$tmp/expected.txt" "$tmp/debian.txt" | grep '^[<>]' | head -20 >&2
  fi
  echo "exports: compared against $(realpath "$debian_lib") too"
elif [ -e "$debian_lib" ]; then
  echo "note: $lib is Debian's own library; compared against the recorded data only"
else
  echo "note: no Debian libibverbs at $debian_lib; compared against the recorded data only"
fi

# ---- 2. Binding of Debian's programs ----------------------------------------

programs=()
for pkg in ibverbs-utils perftest rdmacm-utils; do
  if ! files=$(dpkg -L "$pkg" 2>/dev/null); then
    fail "package $pkg is not installed (scripts/deps.sh installs it)"
    continue
  fi
  while read -r f; do
    [ -f "$f" ] || continue
    # Scripts (run_perftest_*) are not linked against anything.
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    programs+=("$f")
  done < <(grep '/bin/' <<<"$files")
done

checked=0
for prog in "${programs[@]}"; do
  out=$(LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd -r "$prog" 2>&1)
  rc=$?
  checked=$((checked + 1))
  bad=$(grep -E 'undefined symbol|version .* not found|=> not found|symbol lookup error' <<<"$out")
  if [ $rc -ne 0 ] || [ -n "$bad" ]; then
    fail "ldd -r $prog (rc $rc):"
    sed 's/^/    /' <<<"${bad:-$out}" >&2
  fi
  resolved=$(awk '$1 == "libibverbs.so.1" && $2 == "=>" { print $3 }' <<<"$out")
  if [ -z "$resolved" ]; then
    fail "$prog: ldd shows no libibverbs.so.1"
  elif [ "$(realpath "$resolved")" != "$ours_real" ]; then
    fail "$prog: libibverbs.so.1 resolved to $resolved, not ours ($lib)"
  fi
done
echo "ldd -r: $checked programs"
[ $checked -gt 0 ] || fail "no programs found to check"

# pyverbs: its extension modules are loaded with RTLD_NOW, so a missing
# symbol is an ImportError. pyverbs.device first (what the demo uses), then
# every module of the package.
if [ ! -x "$python" ]; then
  fail "$python not found (Debian's python3 carries pyverbs)"
else
  out=$(LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    SV_OURS="$ours_real" SV_DEBIAN="$debian_lib" "$python" -c '
import importlib, os, pkgutil, sys
import pyverbs.device
import pyverbs
failed = []
for m in pkgutil.walk_packages(pyverbs.__path__, "pyverbs."):
    try:
        importlib.import_module(m.name)
    except Exception as e:
        failed.append("%s: %r" % (m.name, e))
mapped = set()
with open("/proc/self/maps") as f:
    for line in f:
        path = line.split()[-1]
        if "/libibverbs.so" in path:
            mapped.add(os.path.realpath(path))
ours = os.environ["SV_OURS"]
for e in failed:
    print("import failed:", e)
if ours not in mapped:
    print("libibverbs mapped:", sorted(mapped), "but not ours:", ours)
    failed.append("ours not mapped")
others = sorted(p for p in mapped if p != ours)
if others:
    print("another libibverbs is mapped too:", others)
    failed.append("other libibverbs")
sys.exit(1 if failed else 0)
' 2>&1)
  rc=$?
  if [ $rc -ne 0 ]; then
    fail "pyverbs with our library (rc $rc):"
    sed 's/^/    /' <<<"$out" >&2
  else
    echo "pyverbs: imports with our library"
  fi
fi

if [ $failures -ne 0 ]; then
  echo "abi_symbols: $failures failure(s)" >&2
  exit 1
fi
echo "abi_symbols: OK"
