#!/usr/bin/env bash
# Open MPI, unmodified (Debian's openmpi-bin), through our libibverbs.so.1 on
# softverbs0: two ranks on this host run tests/mpi/mpi_pingpong (every byte
# checked, both directions) and must finish cleanly (MPI_Finalize returns,
# mpirun exits 0).
#   mpi.sh <dir of the softverbs executable> <mpi_pingpong> <ucx-rc|ucx-ud|openib>
# ucx-rc / ucx-ud: pml ucx with UCX limited to rc_verbs (+ ud_verbs, which
#   UCX needs to wire RC up) or to ud_verbs;
# openib: pml ob1 over the openib BTL (UD-based connection setup, udcm).
# ucx-regcache: regression (issue 18: MPI over UCX re-registered every 1 MiB
#   message): 200 round trips of 1 MiB over pml ucx create at most 30 memfds
#   (registration remaps onto one; UCX's memory hooks must not see our
#   mmap/munmap and drop its registration cache).
# Shared memory transports are off in every case, so the bytes cross softverbs.
set -euo pipefail
bin=$1
pingpong=$2
mode=$3
command -v mpirun >/dev/null || { echo "SKIP: mpirun is not installed (Debian package openmpi-bin)"; exit 77; }
[ -x "$pingpong" ] || { echo "SKIP: $pingpong was not built (Debian package libopenmpi-dev)"; exit 77; }
"$bin/softverbs" run --dev-nodes -- true 2>/dev/null ||
  { echo "SKIP: softverbs run --dev-nodes is not permitted here (no mount namespaces)"; exit 77; }
seg=/dev/shm/softverbs-conf-mpi-$mode-$$
work=$(mktemp -d)
launcher=
cleanup() {
  if [ -n "$launcher" ]; then
    kill -TERM "$launcher" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$launcher" 2>/dev/null || true
    wait "$launcher" 2>/dev/null || true
  fi
  rm -rf "$work" "$seg" "$seg.sysfs"
}
trap cleanup EXIT

mca=(--mca btl_base_warn_component_unused 0)
env_vars=(SOFTVERBS_DEVICE_PATH="$seg" UCX_WARN_UNUSED_ENV_VARS=n UCX_NET_DEVICES=softverbs0:1)
case $mode in
  ucx-rc|ucx-regcache) mca+=(--mca pml ucx --mca osc ucx); env_vars+=(UCX_TLS=rc_verbs,ud_verbs,self) ;;
  ucx-ud) mca+=(--mca pml ucx --mca osc ucx); env_vars+=(UCX_TLS=ud_verbs,self) ;;
  openib) mca+=(--mca pml ob1 --mca btl openib,self --mca btl_openib_allow_ib 1
               --mca btl_openib_cpc_include udcm --mca btl_openib_warn_no_device_params_found 0) ;;
  *) echo "usage: mpi.sh BIN PINGPONG ucx-rc|ucx-ud|openib|ucx-regcache" >&2; exit 2 ;;
esac
tracer=()
sizes=(--iters 50 --warmup 5 1 8 4096 65536 1048576)
if [ "$mode" = ucx-regcache ]; then
  command -v strace >/dev/null || { echo "SKIP: strace is not installed"; exit 77; }
  tracer=(strace -f -qq -e trace=memfd_create -o "$work/memfd")
  sizes=(--iters 200 --warmup 0 1048576)
fi
# -x passes each variable to both ranks; Open MPI refuses root without these.
xs=()
for v in "${env_vars[@]}"; do xs+=(-x "${v%%=*}"); done
env "${env_vars[@]}" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm_rsh_agent= \
  timeout 120 "$bin/softverbs" run --dev-nodes -- "${tracer[@]}" \
  mpirun -np 2 --oversubscribe --bind-to none "${mca[@]}" -x LD_LIBRARY_PATH "${xs[@]}" \
  "$pingpong" "${sizes[@]}" >"$work/out" 2>&1 &
launcher=$!
rc=0
wait "$launcher" || rc=$?
launcher=
cat "$work/out"
[ $rc -eq 0 ] || { echo "FAIL: $mode: mpirun exited $rc"; exit 1; }
grep -qx PASSED "$work/out" || { echo "FAIL: $mode: no PASSED line"; exit 1; }
[ "$(grep -c '^size ' "$work/out")" -eq $(( ${#sizes[@]} - 4 )) ] || { echo "FAIL: $mode: not every size ran"; exit 1; }
if [ "$mode" = ucx-regcache ]; then
  n=$(grep -c 'memfd_create("softverbs-mr"' "$work/memfd" || true)
  echo "memfd_create calls: $n"
  [ "$n" -le 30 ] || { echo "FAIL: $mode: $n registrations remapped for 200 messages"; exit 1; }
fi
echo "PASS: $mode"
