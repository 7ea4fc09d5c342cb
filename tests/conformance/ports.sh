# Sourced by the conformance scripts: a TCP port for a rendezvous on this
# host. It lies below the kernel's ephemeral range, where no outgoing
# connection is ever given one, and no socket of any state uses it now.
# Picked from the caller's PID (and an offset of the caller's choosing, so
# that scripts started at once spread out).
free_tcp_port() {
  local first=10000 ephemeral span p
  read -r ephemeral _ < /proc/sys/net/ipv4/ip_local_port_range
  span=$(( ephemeral - first ))
  p=$(( first + ($$ + ${1:-0}) % span ))
  while [ -n "$(ss -Htan "( sport = :$p )" 2>/dev/null)" ]; do p=$(( first + (p - first + 1) % span )); done
  echo "$p"
}
