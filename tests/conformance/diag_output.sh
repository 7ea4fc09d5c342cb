# Sourced by the scripts that drive infiniband-diags and opensm: run a tool
# with its output kept, and read smpquery's/perfquery's "Name:.....value"
# lines. The caller defines $work (a scratch folder) and fail(), and may set
# run_timeout (seconds per tool, default 20).

# run NAME CMD...: the tool's output in $work/NAME, its exit status checked.
run() {
  local name=$1
  shift
  timeout "${run_timeout:-20}" "$@" >"$work/$name" 2>&1 || { cat "$work/$name" >&2; fail "'$*' exited $?"; }
}
# field FILE NAME: the value of the "Name:.....value" line.
field() { awk -v n="$2" -F':' '{ k = $1; sub(/\.+$/, "", k) } k == n { v = $2; sub(/^\.+/, "", v); print v; exit }' "$1"; }
expect() {  # FILE NAME VALUE
  local got
  got=$(field "$1" "$2")
  [ "$got" = "$3" ] || { cat "$1" >&2; fail "$2 is '$got', expected '$3'"; }
}
