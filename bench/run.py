#!/usr/bin/env python3
"""make bench: softverbs against its peers and the machine's limits, in one go.

Runs Debian's perftest on the host device (softverbs0) and on the RoCE device
(softverbs_roce0, between two network namespaces), UCX's ucx_perftest and
libfabric's fi_pingpong as peers, and the small limit programs of bench/limits
(memcpy, cache-line ping-pong, raw UDP, TCP). Every figure is the median of
--runs runs (>= 5 unless --quick), taken in rounds: each round runs every
measurement once, so softverbs and its peers sample the same minutes of a
machine whose speed drifts. Writes bench/results/<UTC>.json,
docs/PERFORMANCE.md (from bench/PERFORMANCE.md.in) and docs/perf/bw_vs_size.png.
The hand-written docs/PERFORMANCE-NOTES.md, which the template links to, is
never written here.

Every process it starts gets its own session; it is stopped by its PID (the
group it leads) when its run ends, on a timeout and on exit.
"""
import argparse
import atexit
import glob
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
MIB = 1 << 20

PROCS = []          # every Popen this script started
ARGS = None
TMP = None          # bench/results/tmp/<run>/
T0 = time.time()
DATA = {"measurements": {}, "skipped": [], "notes": []}


# --------------------------------------------------------------------------- processes

def start(cmd, env=None, ns=None, out=subprocess.PIPE):
    """Starts cmd (in network namespace ns if given) as the leader of its own session."""
    full = (["ip", "netns", "exec", ns] if ns else []) + [str(c) for c in cmd]
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.Popen(full, env=e, stdout=out, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    PROCS.append(p)
    return p


def stop(p, grace=2.0):
    """Ends p (and the group it leads) by its PID: TERM, then KILL."""
    if p.poll() is None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            try:
                p.wait(wait)
                break
            except subprocess.TimeoutExpired:
                pass
    else:
        try:  # a child the leader left behind
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if p in PROCS:
        PROCS.remove(p)


def cleanup():
    for p in list(PROCS):
        stop(p, grace=0.5)


def on_signal(signum, _frame):
    cleanup()
    sys.exit(128 + signum)


def run_one(cmd, env=None, ns=None, timeout=60):
    p = start(cmd, env, ns)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(p)
        out, _ = p.communicate()
        return 124, (out or "") + "\n[bench: timed out after %ss]" % timeout
    stop(p)
    return p.returncode, out or ""


def run_pair(server, client, env_s=None, env_c=None, ns_s=None, ns_c=None, timeout=60,
             retry=None, wait_server=True):
    """Starts server, then client (rerun while its output matches retry and the
    server lives); returns (client rc, client output, server output)."""
    log = tempfile.NamedTemporaryFile("w+", dir=TMP, prefix="server-", suffix=".out", delete=False)
    srv = start(server, env_s, ns_s, out=log)
    deadline = time.time() + timeout
    rc, out = 1, ""
    for _ in range(200):
        rc, out = run_one(client, env_c, ns_c, timeout=max(1, deadline - time.time()))
        if rc != 0 and retry and re.search(retry, out) and srv.poll() is None and time.time() < deadline:
            time.sleep(0.1)
            continue
        break
    if wait_server:
        try:
            srv.wait(max(1, min(10, deadline - time.time())))
        except subprocess.TimeoutExpired:
            pass
    stop(srv)
    log.seek(0)
    srv_out = log.read()
    log.close()
    os.unlink(log.name)
    return rc, out, srv_out


def remove_segment(path):
    """A device segment and what the device keeps beside it: the sysfs tree
    (src/abi/ibverbs/sysfs_tree.h), the CM's GSI table (.cm), the PMA's
    baseline (.pma) and a topology's subnet state (.subnet-*)."""
    for side in [path, path + ".cm", path + ".pma"] + glob.glob(glob.escape(path) + ".subnet-*"):
        if os.path.exists(side):
            os.unlink(side)
    shutil.rmtree(path + ".sysfs", ignore_errors=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cmdline(cmd, env=None, ns=None):
    pre = "ip netns exec %s " % ns if ns else ""
    envs = " ".join("%s=%s" % kv for kv in sorted((env or {}).items()))
    line = (pre + (envs + " " if envs else "") + " ".join(shlex.quote(str(c)) for c in cmd)).strip()
    return line.replace(str(REPO) + "/", "")  # paths relative to the repository root


# --------------------------------------------------------------------------- bookkeeping

def over_budget():
    return time.time() - T0 > ARGS.budget


def record(key, label, group, command, values, unit, note=None):
    values = [v for v in values if v is not None]
    earlier = DATA["measurements"].get(key)
    if earlier is not None:  # a later round of the same measurement
        values = earlier["runs"] + values
    m = {"label": label, "group": group, "command": command, "runs": values, "unit": unit,
         "median": statistics.median(values) if values else None}
    if note:
        m["note"] = note
    DATA["measurements"][key] = m
    shown = "%.4g %s" % (m["median"], unit) if values else "FAILED"
    print("  %-44s %-16s (%d runs, %.0fs)" % (label, shown, len(values), time.time() - T0), flush=True)
    return m


def skip(what, why):
    entry = {"what": what, "why": why}
    if entry in DATA["skipped"]:
        return  # said in an earlier round
    DATA["skipped"].append(entry)
    print("  SKIP %s: %s" % (what, why), flush=True)


def repeat(fn, runs=None):
    """Runs fn() runs times (default: once per round); fn returns a value, a tuple of values, or None (failed)."""
    vals = []
    for _ in range(runs or ARGS.per_round):
        if over_budget():
            break
        vals.append(fn())
    return vals


def bw_iters(size, cap=100000, budget_bytes=512 * MIB, floor=200):
    n = max(floor, min(cap, budget_bytes // size))
    return max(5, n // 10) if ARGS.quick else n


# --------------------------------------------------------------------------- perftest (softverbs)

PT_RETRY = r"Couldn't connect|Unable to open file descriptor"


def parse_perftest(tool, out, tail=False):
    """The first result row: latency tools -> t_typical (us), with tail: (t_typical, t_avg,
    99th percentile); bw tools -> (GB/s, Mpps)."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if "#bytes" in line:
            for row in lines[i + 1:]:
                f = row.split()
                if len(f) >= 5 and f[0].isdigit():
                    if tool.endswith("_lat"):
                        return float(f[4]) if not tail else (float(f[4]), float(f[5]), float(f[7]))
                    return (float(f[3]) * MIB / 1e9, float(f[4]))
            break
    return None


def perftest_once(tool, size, iters, roce=None, faults=None, tail=False):
    port = free_port()
    opts = ["-p", port, "-F", "-n", iters]
    if tool != "ib_atomic_lat":
        opts += ["-s", size]
    if roce is None:
        env = {"LD_LIBRARY_PATH": str(ARGS.lib), "SOFTVERBS_DEVICE_PATH": HOST_SEGMENT}
        opts = ["-d", "softverbs0"] + opts
        rc, out, sout = run_pair([tool] + opts, [tool] + opts + ["localhost"], env, env,
                                 timeout=ARGS.timeout, retry=PT_RETRY)
        cmd = cmdline([tool] + opts + ["localhost"], env)
    else:
        opts = ["-d", "softverbs_roce0", "-x", "0"] + opts
        env_a, env_b = roce.env("a", faults), roce.env("b", faults)
        rc, out, sout = run_pair([tool] + opts, [tool] + opts + [roce.addr_a], env_a, env_b,
                                 roce.ns_a, roce.ns_b, timeout=ARGS.timeout, retry=PT_RETRY)
        cmd = cmdline([tool] + opts + [roce.addr_a], env_b, roce.ns_b)
    value = parse_perftest(tool, out, tail) if rc == 0 else None
    if value is None:
        note_failure(cmd, rc, out, sout)
    return value, cmd


def note_failure(cmd, rc, out, sout):
    tail = "\n".join(out.strip().splitlines()[-4:])
    stail = "\n".join(sout.strip().splitlines()[-3:])
    print("    run failed (rc %s): %s\n      %s\n      server: %s" % (rc, cmd, tail.replace("\n", "\n      "),
                                                                    stail.replace("\n", "\n      ")), flush=True)
    DATA["notes"].append("failed run (rc %s): %s: %s" % (rc, cmd, tail.splitlines()[-1] if tail else ""))


def measure_perftest(key, label, group, tool, size, iters, pick=None, unit="us", roce=None, faults=None):
    cmds = []

    def once():
        v, c = perftest_once(tool, size, iters, roce, faults)
        cmds.append(c)
        if v is None:
            return None
        return v if pick is None else v[pick]
    vals = repeat(once)
    return record(key, label, group, cmds[0] if cmds else "", vals, unit)


def perftest_figures(figures, group, tool, size, iters, roce=None, faults=None, tail=False):
    """One set of runs, several figures: figures[i] = (key, label, unit) records element i
    of every run's result (parse_perftest's tuple); a figure whose key is None is not kept."""
    cmds, vals = [], [[] for _ in figures]

    def once():
        v, c = perftest_once(tool, size, iters, roce, faults, tail)
        cmds.append(c)
        return v
    for v in repeat(once):
        if v is not None:
            for i, x in enumerate(v):
                vals[i].append(x)
    for (key, label, unit), got in zip(figures, vals):
        if key:
            record(key, label, group, cmds[0] if cmds else "", got, unit)


def perftest_lat_tail(key, label, group, tool, size, iters, roce=None):
    """t_typical (the compared figure), t_avg and the 99th percentile of one set of runs."""
    perftest_figures([(key, label + " (t_typical)", "us"), (key + ".avg", label + " (t_avg)", "us"),
                      (key + ".p99", label + " (99th percentile)", "us")],
                     group, tool, size, iters, roce, tail=True)


def perftest_bw_both(key_bw, key_mr, label, group, tool, size, iters, roce=None, faults=None):
    """Bandwidth (GB/s) and message rate (Mpps) of one set of runs."""
    perftest_figures([(key_bw, label + " bandwidth", "GB/s"), (key_mr, label + " message rate", "Mpps")],
                     group, tool, size, iters, roce, faults)


# --------------------------------------------------------------------------- UCX

UCX_RETRY = r"Connection refused|connect\(\) failed|Destination is unreachable|failed to connect"


def on_softverbs(cmd):
    """cmd through our library on softverbs0, where UCX finds the device (its
    /dev/infiniband stand-in: `softverbs run --dev-nodes`)."""
    return [ARGS.build / "bin" / "softverbs", "run", "--dev-nodes", "--"] + cmd


SOFTVERBS_UCX_ENV = {}  # filled in main(): the bench's own segment, softverbs0's port


def ucx_once(test, size, iters, tls, ns_pair=None, addr="localhost", softverbs=False):
    port = free_port()
    env = {"UCX_TLS": tls, "UCX_WARN_UNUSED_ENV_VARS": "n"}
    client = ["ucx_perftest", addr, "-p", port, "-t", test, "-s", size, "-n", iters,
              "-w", max(10, iters // 10), "-f", "-v"]
    server = ["ucx_perftest", "-p", port]
    if softverbs:
        env.update(SOFTVERBS_UCX_ENV)
        client, server = on_softverbs(client), on_softverbs(server)
    ns_s, ns_c = ns_pair or (None, None)
    env_s = dict(env)
    if ns_pair:  # over the veth only: each end names its side of the pair
        env_s["UCX_NET_DEVICES"] = ARGS._roce.dev_a
        env["UCX_NET_DEVICES"] = ARGS._roce.dev_b
    rc, out, sout = run_pair(server, client, env_s, env, ns_s, ns_c,
                             timeout=ARGS.timeout, retry=UCX_RETRY)
    cmd = cmdline(client, env, ns_c)
    value = None
    if rc == 0:
        for line in reversed(out.splitlines()):
            f = line.strip().split(",")
            if len(f) == 8 and f[0].isdigit():
                # iterations, 50th percentile lat, avg lat, overall lat, avg bw, overall bw, avg mr, overall mr
                value = (float(f[1]), float(f[5]) * MIB / 1e9, float(f[7]) / 1e6)
                break
    if value is None:
        note_failure(cmd, rc, out, sout)
    return value, cmd


def measure_ucx(prefix, name, group, tls, tests, ns_pair=None, addr="localhost", softverbs=False):
    """tests: [(key suffix, test, size, iters, pick: 0 lat us, 1 GB/s, 2 Mpps)]"""
    for suffix, test, size, iters, picks in tests:
        if over_budget():
            skip("%s %s %s" % (name, test, size), "over the time budget")
            continue
        cmds, vals = [], {p: [] for p in picks}
        for _ in range(ARGS.per_round):
            v, c = ucx_once(test, size, iters, tls, ns_pair, addr, softverbs)
            cmds.append(c)
            if v is not None:
                for p in picks:
                    vals[p].append(v[p])
        for p in picks:
            unit = ("us", "GB/s", "Mpps")[p]
            what = ("latency (p50)", "bandwidth", "message rate")[p]
            record("%s.%s.%s" % (prefix, suffix, ("lat", "bw", "mr")[p]),
                   "UCX %s %s %s %s" % (name, test, fmt_size(size), what), group,
                   cmds[0] if cmds else "", vals[p], unit)


def ucx_suite(lat=True, small=True, sizes=(65536, MIB)):
    n_lat = 2000 if ARGS.quick else 20000
    n_mr = 20000 if ARGS.quick else 200000
    t = []
    if lat:
        t += [("ucp_put_lat.8", "ucp_put_lat", 8, n_lat, (0,)), ("tag_lat.8", "tag_lat", 8, n_lat, (0,))]
    if small:
        t += [("ucp_put_bw.8", "ucp_put_bw", 8, n_mr, (2,)), ("tag_bw.8", "tag_bw", 8, n_mr, (2,))]
    for s in sizes:
        t += [("ucp_put_bw.%d" % s, "ucp_put_bw", s, bw_iters(s), (1,)),
              ("tag_bw.%d" % s, "tag_bw", s, bw_iters(s), (1,))]
    return t


# --------------------------------------------------------------------------- limits

def limit_bin(name):
    return ARGS.build / "bin" / ("sv_bench_" + name)


def parse_result(out):
    m = re.search(r"^result (\S+) (\S+)", out, re.M)
    return float(m.group(1)) if m else None


def measure_limit(key, label, cmd, unit, ns=None):
    def once():
        rc, out = run_one(cmd, ns=ns, timeout=30)
        v = parse_result(out) if rc == 0 else None
        if v is None:
            note_failure(cmdline(cmd, ns=ns), rc, out, "")
        return v
    record(key, label, "limits", cmdline(cmd, ns=ns), repeat(once), unit)


def measure_limit_pair(key, label, tool, client_args, unit, addr, ns_s=None, ns_c=None, wait_server=False,
                       opts=(), scale=1.0):
    """The limit program's server and client (both given opts before the mode);
    the client's result times scale is recorded."""
    def once():
        port = free_port()
        rc, out, sout = run_pair([limit_bin(tool)] + list(opts) + ["server", addr, port],
                                 [limit_bin(tool)] + list(opts) + ["client", addr, port] + client_args,
                                 ns_s=ns_s, ns_c=ns_c, timeout=30, wait_server=wait_server)
        v = parse_result(out) if rc == 0 else None
        if v is None:
            note_failure(tool, rc, out, sout)
            return None
        return v * scale
    cmd = cmdline([limit_bin(tool)] + list(opts) + ["client", addr, "<port>"] + client_args, ns=ns_c)
    record(key, label, "limits", cmd, repeat(once), unit)


# The UDP datagram of an 8 B RDMA WRITE ONLY: BTH (12) + RETH (16) + 8 B + ICRC (4).
ROCE_WRITE8_DATAGRAM = 12 + 16 + 8 + 4


def measure_udp_half_rtt(key, label, size, block, addr, ns_s=None, ns_c=None):
    """Half the median round trip of bench/limits/udp_rtt.cc: a perftest
    latency is half a round trip too."""
    iters = "2000" if ARGS.quick else "20000"
    measure_limit_pair(key, label, "udp_rtt", [iters, str(size)], "us", addr, ns_s, ns_c,
                       opts=["--block"] if block else [], scale=0.5)


# --------------------------------------------------------------------------- namespaces

class Netns:
    """Two namespaces joined by a veth pair, made by tests/roce/netns.sh's netns_up."""

    def __init__(self):
        script = REPO / "tests/roce/netns.sh"
        up = subprocess.run(
            ["bash", "-c", '. "$0"; netns_up; trap - EXIT; '
             'echo "$NETNS_A $NETNS_B $ADDR_A $ADDR_B va-$$ vb-$$"', str(script)],
            capture_output=True, text=True, timeout=30)
        if up.returncode != 0:
            raise RuntimeError((up.stderr or up.stdout).strip() or "netns_up exited %d" % up.returncode)
        self.ns_a, self.ns_b, self.addr_a, self.addr_b, self.dev_a, self.dev_b = up.stdout.split()
        self.segments = []
        atexit.register(self.down)

    def env(self, end, faults=None):
        seg = "/dev/shm/softverbs-bench-%d-%s" % (os.getpid(), end)
        self.segments.append(seg)
        e = {"LD_LIBRARY_PATH": str(ARGS.lib), "SOFTVERBS_DEVICE_PATH": seg,
             "SOFTVERBS_ROCE_ADDR": self.addr_a if end == "a" else self.addr_b}
        if faults:
            e["SOFTVERBS_FAULTS"] = faults
        return e

    def down(self):
        if not self.ns_a:
            return
        script = REPO / "tests/roce/netns.sh"
        subprocess.run(["bash", "-c", '. "$0"; NETNS_A=$1; NETNS_B=$2; netns_down', str(script),
                        self.ns_a, self.ns_b], timeout=30)
        for s in set(self.segments):
            try:
                remove_segment(s)
            except FileNotFoundError:
                pass
        self.ns_a = None


# --------------------------------------------------------------------------- formatting

def fmt_size(n):
    for unit, scale in (("MiB", MIB), ("KiB", 1024)):
        if n >= scale and n % scale == 0:
            return "%d %s" % (n // scale, unit)
    return "%d B" % n


def fmt(v, unit):
    if v is None:
        return "—"
    if unit == "us":
        return "%.2f µs" % v if v < 100 else "%.0f µs" % v
    if unit == "ns":
        return "%.0f ns" % v
    if unit == "GB/s":
        return "%.2f GB/s" % v if v < 100 else "%.0f GB/s" % v
    if unit == "Mpps":
        return "%.2f Mpps" % v
    if unit == "instr":
        return "%.0f" % v
    return "%.3g %s" % (v, unit)


def median(key):
    m = DATA["measurements"].get(key)
    return m["median"] if m else None


def unit_of(key):
    m = DATA["measurements"].get(key)
    return m["unit"] if m else ""


# Rows of the main table: softverbs figure, the peer it is held against, the
# issue's target for the ratio (softverbs / peer) where there is one.
#   (section, what, softverbs key, peer key, peer name, target, lower_is_better)
COMPARISONS = [
    ("host", "ib_write_lat 8 B", "sv.host.ib_write_lat.8", "ucx.posix.ucp_put_lat.8.lat", "UCX posix ucp_put_lat 8 B", 1.0, True),
    ("host", "ib_send_lat 8 B", "sv.host.ib_send_lat.8", "ucx.posix.tag_lat.8.lat", "UCX posix tag_lat 8 B", 1.0, True),
    ("host", "ib_read_lat 8 B", "sv.host.ib_read_lat.8", "ucx.posix.ucp_put_lat.8.lat", "UCX posix ucp_put_lat 8 B", 2.0, True),
    ("host", "ib_atomic_lat 8 B", "sv.host.ib_atomic_lat.8", "ucx.posix.ucp_put_lat.8.lat", "UCX posix ucp_put_lat 8 B", 2.0, True),
    ("host", "ib_write_bw 64 B message rate", "sv.host.ib_write_bw.64.mr", "ucx.posix.tag_bw.8.mr", "UCX posix tag_bw 8 B rate", 1.0, False),
    ("host", "ib_read_bw 64 B message rate", "sv.host.ib_read_bw.64.mr", "ucx.posix.tag_bw.8.mr", "UCX posix tag_bw 8 B rate", 1.0, False),
    ("host", "ib_send_bw 64 B message rate", "sv.host.ib_send_bw.64.mr", "ucx.posix.tag_bw.8.mr", "UCX posix tag_bw 8 B rate", 1.0, False),
    ("host", "ib_write_bw 64 KiB", "sv.host.ib_write_bw.65536.bw", "ucx.posix.ucp_put_bw.65536.bw", "UCX posix ucp_put_bw 64 KiB", None, False),
    ("host", "ib_write_bw 1 MiB", "sv.host.ib_write_bw.1048576.bw", "ucx.posix.ucp_put_bw.1048576.bw", "UCX posix ucp_put_bw 1 MiB", 0.8, False),
    ("host", "ib_read_bw 64 KiB", "sv.host.ib_read_bw.65536.bw", "ucx.posix.ucp_put_bw.65536.bw", "UCX posix ucp_put_bw 64 KiB", None, False),
    ("host", "ib_read_bw 1 MiB", "sv.host.ib_read_bw.1048576.bw", "ucx.posix.ucp_put_bw.1048576.bw", "UCX posix ucp_put_bw 1 MiB", 0.8, False),
    ("host", "UCX rc_verbs tag_lat 8 B", "ucx.sv_rc.tag_lat.8.lat", "ucx.posix.tag_lat.8.lat", "UCX posix tag_lat 8 B", 1.5, True),
    ("host", "UCX rc_verbs tag_bw 1 MiB", "ucx.sv_rc.tag_bw.1048576.bw", "ucx.posix.tag_bw.1048576.bw", "UCX posix tag_bw 1 MiB", 0.8, False),
    # >= 0.8x the throughput of a ping-pong is <= 1.25x its half round trip.
    ("host", "MPI ping-pong 1 MiB, pml ucx rc_verbs", "mpi.sv_ucx_rc.1048576", "mpi.vader.1048576", "Open MPI vader 1 MiB", 1.25, True),
    ("host", "ib_write_bw 1 MiB vs memcpy", "sv.host.ib_write_bw.1048576.bw", "limits.memcpy.1048576", "memcpy 1 MiB, one thread", None, False),
    # RoCE against the kernel's best reliable transport on the same veth;
    # UCX's tcp transport is shown beside it, without a target.
    ("roce", "ib_write_bw 64 KiB", "sv.roce.ib_write_bw.65536.bw", "limits.tcp_bw.veth.65536", "TCP stream, veth, 64 KiB writes", 0.8, False),
    ("roce", "ib_write_bw 1 MiB", "sv.roce.ib_write_bw.1048576.bw", "limits.tcp_bw.veth", "TCP stream, veth, 1 MiB writes", 1.0, False),
    ("roce", "ib_write_bw 64 KiB vs UCX tcp", "sv.roce.ib_write_bw.65536.bw", "ucx.tcp_veth.ucp_put_bw.65536.bw", "UCX tcp ucp_put_bw 64 KiB, veth", None, False),
    ("roce", "ib_write_bw 1 MiB vs UCX tcp", "sv.roce.ib_write_bw.1048576.bw", "ucx.tcp_veth.ucp_put_bw.1048576.bw", "UCX tcp ucp_put_bw 1 MiB, veth", None, False),
    # ib_write_lat's target spins on memory and never calls into the library,
    # so a library thread woken by the kernel receives every WRITE: its limit
    # is a ping-pong whose receivers block. ib_send_lat polls the CQ, which
    # receives on the polling thread: its limit is the busy-polling one.
    ("roce", "ib_write_lat 8 B", "sv.roce.ib_write_lat.8", "limits.udp_half_rtt_block.veth", "raw UDP 8 B half round trip, veth, blocking recv", 1.5, True),
    ("roce", "ib_send_lat 8 B", "sv.roce.ib_send_lat.8", "limits.udp_half_rtt.veth", "raw UDP 8 B half round trip, veth, busy-polling", 1.5, True),
    ("roce", "ib_write_bw 1 MiB, loss=0.001 vs lossless", "sv.roce_loss.ib_write_bw.1048576.bw", "sv.roce.ib_write_bw.1048576.bw", "RoCE ib_write_bw 1 MiB, lossless", 0.8, False),
    ("roce", "ib_write_bw 64 KiB, loss=0.001 vs lossless", "sv.roce_loss.ib_write_bw.65536.bw", "sv.roce.ib_write_bw.65536.bw", "RoCE ib_write_bw 64 KiB, lossless", None, False),
    ("host", "RDMA CM connect (cmtime)", "sv.cm.host.connect", "limits.tcp_connect.lo", "TCP connect/accept, loopback", None, True),
    ("roce", "RDMA CM connect (cmtime)", "sv.cm.roce.connect", "limits.tcp_connect.veth", "TCP connect/accept, veth", None, True),
]


def comparisons():
    rows = []
    for section, what, sk, pk, pname, target, lower in COMPARISONS:
        sv, peer = median(sk), median(pk)
        ratio = sv / peer if sv is not None and peer else None
        verdict = None
        if target is not None and ratio is not None:
            factor = ratio / target  # <= 1 meets a latency target, >= 1 a bandwidth target
            met = factor <= 1 if lower else factor >= 1
            verdict = {"met": met, "factor": factor}
        rows.append({"section": section, "what": what, "softverbs": sk, "peer": pk, "peer_name": pname,
                     "softverbs_median": sv, "peer_median": peer, "ratio": ratio,
                     "target": None if target is None else ("<= %.1fx" if lower else ">= %.1fx") % target,
                     "verdict": verdict})
    return rows


def lower_of(row):
    return row["target"] is not None and row["target"].startswith("<=")


def render_table(rows):
    out = ["| | softverbs | peer | peer figure | ratio | target | |", "|---|---|---|---|---|---|---|"]
    for section in ("host", "roce"):
        for r in (r for r in rows if r["section"] == section):
            v = r["verdict"]
            if v is None:
                verdict = "—" if r["target"] is None else "not measured"
            elif v["met"]:
                verdict = "met (%.0f%% %s)" % (100 * abs(1 - v["factor"]), "below" if lower_of(r) else "above")
            elif lower_of(r):
                verdict = ("**missed by %.0f%%**" % (100 * (v["factor"] - 1)) if v["factor"] < 2 else
                           "**missed: %.2fx the target**" % v["factor"])
            else:
                verdict = "**missed by %.0f%%** (needs %.1fx)" % (100 * (1 - v["factor"]), 1 / v["factor"])
            name = ("host: " if section == "host" else "RoCE: ") + r["what"]
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                name, fmt(r["softverbs_median"], unit_of(r["softverbs"])), r["peer_name"],
                fmt(r["peer_median"], unit_of(r["peer"])),
                "—" if r["ratio"] is None else "%.2fx" % r["ratio"], r["target"] or "—", verdict))
    return "\n".join(out)


def render_group(groups):
    out = ["| measurement | median | runs | unit |", "|---|---|---|---|"]
    for key, m in DATA["measurements"].items():
        if m["group"] in groups:
            runs = ", ".join(("%.0f" if m["unit"] == "instr" else "%.3g") % v for v in m["runs"])
            out.append("| %s | %s | %s | %s |" % (m["label"], fmt(m["median"], m["unit"]), runs or "failed", m["unit"]))
    return "\n".join(out)


def render_sweep():
    sizes = DATA.get("sweep_sizes", [])
    series = [(k, n) for k, n in SWEEP_SERIES if any(DATA["measurements"].get(k % s) for s in sizes)]
    if not series:
        return "(no sweep)"
    out = ["| size | " + " | ".join(n for _, n in series) + " |", "|---" * (len(series) + 1) + "|"]
    for s in sizes:
        out.append("| %s | " % fmt_size(s) + " | ".join(fmt(median(k % s), "GB/s") for k, _ in series) + " |")
    return "\n".join(out)


SWEEP_SERIES = [
    ("sv.host.ib_write_bw.%d.bw", "softverbs ib_write_bw (host)"),
    ("ucx.posix.ucp_put_bw.%d.bw", "UCX posix ucp_put_bw"),
    ("ucx.tcp.ucp_put_bw.%d.bw", "UCX tcp ucp_put_bw (localhost)"),
]


def plot(path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        skip("plot", "matplotlib is not importable by %s (%s); use /usr/bin/python3 with python3-matplotlib"
             % (sys.executable, e))
        return False
    sizes = DATA.get("sweep_sizes", [])
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    for (key, name), style in zip(SWEEP_SERIES, ("o-", "s--", "^:")):
        pts = [(s, median(key % s)) for s in sizes if median(key % s) is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=name)
    extra = [("sv.roce.ib_write_bw.%d.bw", "softverbs ib_write_bw (RoCE, veth)", "D", "tab:red"),
             ("sv.roce_loss.ib_write_bw.%d.bw", "softverbs RoCE, loss=0.001", "x", "tab:red"),
             ("ucx.tcp_veth.ucp_put_bw.%d.bw", "UCX tcp ucp_put_bw (veth)", "v", "tab:purple"),
             ("limits.memcpy.%d", "memcpy, one thread", "*", "black"),
             ({65536: "limits.tcp_bw.veth.65536", MIB: "limits.tcp_bw.veth"}, "TCP stream (veth)", "P", "tab:green")]
    for key, name, marker, color in extra:
        keys = key if isinstance(key, dict) else {s: key % s for s in (65536, MIB)}
        pts = [(s, median(k)) for s, k in keys.items() if median(k) is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker, color=color, label=name, markersize=9)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bandwidth (GB/s, 10^9 B/s)")
    ax.set_title("Bandwidth vs message size (medians of %d runs, %s)" % (ARGS.runs, DATA["date"]))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return True


# --------------------------------------------------------------------------- machine

def machine():
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def pkg(name):
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", name], capture_output=True, text=True)
        return r.stdout.strip() or None
    git = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True)
    return {"nproc": os.cpu_count(), "cpu_model": model, "kernel": platform.release(),
            "hostname": platform.node(), "loadavg_start": list(os.getloadavg()),
            "git_commit": git.stdout.strip(), "git_dirty": bool(dirty.stdout.strip()),
            "packages": {p: pkg(p) for p in ("perftest", "ucx-utils", "libfabric-bin")}}


# --------------------------------------------------------------------------- the run

HOST_SEGMENT = None


def have(tool):
    return any((Path(d) / tool).exists() for d in os.environ.get("PATH", "").split(":"))


def section_host():
    print("softverbs host device (softverbs0)", flush=True)
    if not (ARGS.lib / "libibverbs.so.1").exists():
        skip("softverbs host", "%s/libibverbs.so.1 is missing (build first)" % ARGS.lib)
        return
    if not have("ib_write_lat"):
        skip("softverbs host", "perftest is not installed")
        return
    n_lat = 1000 if ARGS.quick else 10000
    for tool in ("ib_write_lat", "ib_send_lat", "ib_read_lat", "ib_atomic_lat"):
        measure_perftest("sv.host.%s.8" % tool, "softverbs host %s 8 B (t_typical)" % tool, "softverbs-host",
                         tool, 8, n_lat)
    for tool in ("ib_write_bw", "ib_read_bw"):
        for size in (64, 65536, MIB):
            perftest_bw_both("sv.host.%s.%d.bw" % (tool, size), "sv.host.%s.%d.mr" % (tool, size),
                             "softverbs host %s %s" % (tool, fmt_size(size)), "softverbs-host",
                             tool, size, bw_iters(size))
    perftest_bw_both("sv.host.ib_send_bw.64.bw", "sv.host.ib_send_bw.64.mr", "softverbs host ib_send_bw 64 B",
                     "softverbs-host", "ib_send_bw", 64, bw_iters(64))


def section_sweep():
    sizes = DATA["sweep_sizes"]
    print("size sweep %s .. %s" % (fmt_size(sizes[0]), fmt_size(sizes[-1])), flush=True)
    for size in sizes:
        if over_budget():
            skip("sweep %s" % fmt_size(size), "over the time budget")
            continue
        if "sv.host.ib_write_bw.%d.bw" % size not in DATA["measurements"] and (ARGS.lib / "libibverbs.so.1").exists():
            perftest_bw_both("sv.host.ib_write_bw.%d.bw" % size, None, "softverbs host ib_write_bw %s" % fmt_size(size),
                             "sweep", "ib_write_bw", size, bw_iters(size))
        if have("ucx_perftest"):
            for tls, prefix in (("posix", "ucx.posix"), ("tcp", "ucx.tcp")):
                if "%s.ucp_put_bw.%d.bw" % (prefix, size) not in DATA["measurements"]:
                    measure_ucx(prefix, tls, "sweep", tls,
                                [("ucp_put_bw.%d" % size, "ucp_put_bw", size, bw_iters(size), (1,))])


def section_ucx_host():
    print("UCX ucx_perftest on localhost", flush=True)
    if not have("ucx_perftest"):
        skip("UCX", "ucx_perftest is not installed (Debian package ucx-utils)")
        return
    sv_rc = (ARGS.lib / "libibverbs.so.1").exists()
    def rc_verbs(tests):
        # UCX's RC transport on our device (ud_verbs wires it up), each test
        # right after the posix one it is compared with: the machine's speed
        # drifts within a round.
        if sv_rc:
            measure_ucx("ucx.sv_rc", "rc_verbs on softverbs0", "ucx", "rc_verbs,ud_verbs", tests, softverbs=True)
    measure_ucx("ucx.posix", "posix", "ucx", "posix", ucx_suite(small=False, sizes=()))
    rc_verbs([("tag_lat.8", "tag_lat", 8, 2000 if ARGS.quick else 20000, (0,))])
    measure_ucx("ucx.posix", "posix", "ucx", "posix", ucx_suite(lat=False))
    rc_verbs([("tag_bw.%d" % MIB, "tag_bw", MIB, bw_iters(MIB), (1,))])
    measure_ucx("ucx.sysv", "sysv", "ucx", "sysv", ucx_suite())
    # cma moves data only (no active messages): UCX needs posix beside it for the wire-up.
    measure_ucx("ucx.cma", "cma (+posix)", "ucx", "cma,posix", ucx_suite(lat=False, small=False))
    measure_ucx("ucx.tcp", "tcp", "ucx", "tcp", ucx_suite())


MPI_PINGPONG_RE = r"^size (\d+) iters \d+ median_us (\S+)"


def section_mpi():
    """A two-rank MPI ping-pong (tests/mpi/) at 1 MiB: pml ucx on softverbs0
    with UCX's defaults but for the transports, against Open MPI's own
    shared-memory BTL (vader)."""
    print("Open MPI ping-pong 1 MiB", flush=True)
    exe = ARGS.build / "bin" / "sv_mpi_pingpong"
    if not have("mpirun") or not exe.exists():
        skip("MPI", "mpirun or %s is missing (Debian packages openmpi-bin, libopenmpi-dev)" % exe)
        return
    iters = 50 if ARGS.quick else 500
    root = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    base = ["mpirun", "-np", 2, "--oversubscribe", "--bind-to", "none", "--mca", "btl_base_warn_component_unused", 0]
    cases = (
        ("mpi.sv_ucx_rc.%d" % MIB, "MPI ping-pong 1 MiB, pml ucx rc_verbs on softverbs0",
         on_softverbs(base + ["--mca", "pml", "ucx", "-x", "LD_LIBRARY_PATH", "-x", "SOFTVERBS_DEVICE_PATH",
                              "-x", "UCX_TLS", "-x", "UCX_NET_DEVICES"]),
         dict(SOFTVERBS_UCX_ENV, UCX_TLS="rc_verbs,ud_verbs,self", **root)),
        ("mpi.vader.%d" % MIB, "MPI ping-pong 1 MiB, pml ob1 btl vader (shared memory)",
         base + ["--mca", "pml", "ob1", "--mca", "btl", "vader,self"], dict(root)),
    )
    for key, label, cmd, env in cases:
        full = cmd + [exe, "--iters", iters, "--warmup", 10, MIB]
        def once():
            rc, out = run_one(full, env, timeout=ARGS.timeout)
            m = re.search(MPI_PINGPONG_RE, out, re.M)
            if rc != 0 or m is None or "PASSED" not in out:
                note_failure(cmdline(full, env), rc, out, "")
                return None
            return float(m.group(2))
        record(key, label + " (half round trip)", "mpi", cmdline(full, env), repeat(once), "us")


def section_fabric():
    print("libfabric fi_pingpong on localhost", flush=True)
    if not have("fi_pingpong"):
        skip("libfabric", "fi_pingpong is not installed (Debian package libfabric-bin)")
        return
    iters = 2000 if ARGS.quick else 20000
    for prov in ("shm", "tcp"):
        cmds = []

        def once():
            port = free_port()
            base = ["fi_pingpong", "-p", prov, "-e", "rdm", "-S", 8, "-I", iters]
            rc, out, sout = run_pair(base + ["-B", port], base + ["-P", port, "localhost"],
                                     timeout=ARGS.timeout, retry=r"failed to connect|Connection refused")
            cmds.append(cmdline(base + ["-P", port, "localhost"]))
            for line in out.splitlines():
                f = line.split()
                if len(f) == 8 and f[0] == "8":
                    return float(f[6])
            note_failure(cmds[-1], rc, out, sout)
            return None
        record("fabric.%s.pingpong.8" % prov, "libfabric %s fi_pingpong 8 B (usec/xfer)" % prov, "fabric",
               cmds[0] if cmds else "", repeat(once), "us")


CMTIME_CONNECT_RE = r"^connect\s*:\s*\S+\s+\S+\s+\S+\s+(\S+)"


def measure_cmtime(key, label, group, addr, env_s, env_c, ns_s=None, ns_c=None):
    """cmtime's connect step (microseconds per connection, all of them
    connecting at once) between a server and a client on `addr`."""
    n = 20 if ARGS.quick else 100
    cmds = []

    def once():
        port = free_port()
        server = ["cmtime", "-p", port, "-c", n]
        client = ["cmtime", "-s", addr, "-p", port, "-c", n]
        rc, out, sout = run_pair(server, client, env_s, env_c, ns_s, ns_c, timeout=ARGS.timeout,
                                 retry=r"REJECTED|reject|UNREACHABLE", wait_server=False)
        cmds.append(cmdline(client, env_c, ns_c))
        m = re.search(CMTIME_CONNECT_RE, out, re.M) if rc == 0 else None
        if m is None:
            note_failure(cmds[-1], rc, out, sout)
            return None
        return float(m.group(1))
    record(key, label, group, cmds[0] if cmds else "", repeat(once), "us")


def measure_tcp_connect(key, label, n, addr, ns_s=None, ns_c=None):
    """bench/limits/tcp_connect.cc: both ends are told how many connections."""
    def once():
        port = free_port()
        rc, out, sout = run_pair([limit_bin("tcp_connect"), "server", addr, port, n],
                                 [limit_bin("tcp_connect"), "client", addr, port, n],
                                 ns_s=ns_s, ns_c=ns_c, timeout=30, wait_server=True)
        v = parse_result(out) if rc == 0 else None
        if v is None:
            note_failure("tcp_connect", rc, out, sout)
        return v
    cmd = cmdline([limit_bin("tcp_connect"), "client", addr, "<port>", n], ns=ns_c)
    record(key, label, "limits", cmd, repeat(once), "us")


def section_cm():
    """Connection setup through the RDMA CM (cmtime, its connect step per
    connection) on both devices, beside TCP's connect/accept on the same
    path (bench/limits/tcp_connect.cc): both open their connections at once."""
    print("connection setup: RDMA CM (cmtime) and TCP", flush=True)
    if not have("cmtime") or not (ARGS.lib / "librdmacm.so.1").exists():
        skip("RDMA CM connection setup", "cmtime (Debian package rdmacm-utils) or our librdmacm.so.1 is missing")
        return
    n = ["20" if ARGS.quick else "100"]
    host = {"LD_LIBRARY_PATH": str(ARGS.lib), "SOFTVERBS_DEVICE_PATH": HOST_SEGMENT}
    measure_cmtime("sv.cm.host.connect", "softverbs0 RDMA CM connect (cmtime), per connection", "softverbs-cm",
                   "127.0.0.1", host, host)
    if limit_bin("tcp_connect").exists():
        measure_tcp_connect("limits.tcp_connect.lo", "TCP connect/accept, loopback, per connection", n[0], "127.0.0.1")
    try:
        ns = Netns()
    except Exception as e:  # noqa: BLE001 - any failure means: no namespaces here
        skip("RDMA CM between namespaces", str(e))
        return
    try:
        measure_cmtime("sv.cm.roce.connect", "softverbs_roce0 RDMA CM connect (cmtime), per connection",
                       "softverbs-cm", ns.addr_a, ns.env("a"), ns.env("b"), ns.ns_a, ns.ns_b)
        if limit_bin("tcp_connect").exists():
            measure_tcp_connect("limits.tcp_connect.veth", "TCP connect/accept, veth, per connection", n[0],
                                ns.addr_a, ns.ns_a, ns.ns_b)
    finally:
        ns.down()


def section_limits():
    print("machine limits", flush=True)
    if not limit_bin("memcpy_bw").exists():
        skip("limits", "%s is missing: build with -DSOFTVERBS_BENCH=ON" % limit_bin("memcpy_bw"))
        return
    secs = "0.05" if ARGS.quick else "0.3"
    for size in (65536, MIB):
        measure_limit("limits.memcpy.%d" % size, "memcpy %s, one thread" % fmt_size(size),
                      [limit_bin("memcpy_bw"), size, secs], "GB/s")
    if (os.cpu_count() or 1) >= 2:
        measure_limit("limits.cacheline_rtt", "cache-line ping-pong round trip, CPU 0 <-> 1",
                      [limit_bin("cacheline_pingpong"), 100000 if ARGS.quick else 1000000], "ns")
    else:
        skip("cache-line ping-pong", "one CPU")
    iters = ["2000" if ARGS.quick else "20000", "8"]
    measure_limit_pair("limits.udp_rtt.lo", "raw UDP 8 B round trip, loopback, busy-polling", "udp_rtt", iters, "us",
                       "127.0.0.1")
    measure_limit_pair("limits.tcp_bw.lo", "TCP stream, loopback", "tcp_bw", ["0.1" if ARGS.quick else "0.5"], "GB/s",
                       "127.0.0.1", wait_server=True)


# Longer than the device's 2 s sweep period, so a sweep falls inside.
IDLE_SECONDS = 2.5


def section_scale():
    """Many RC QPs on one device (bench/scale/qp_scale.cc): per-QP setup time
    and memory, and 8-byte WRITE latency round robin over all of them."""
    print("softverbs: many QPs on one device", flush=True)
    tool = ARGS.build / "bin" / "sv_bench_qp_scale"
    if not tool.exists():
        skip("QP scale", "%s is missing: build with -DSOFTVERBS_BENCH=ON" % tool)
        return
    metrics = (("setup_us_per_qp", "setup (create, INIT, RTR, RTS) per QP", "us"),
               ("bytes_per_qp", "memory per QP (device segment + process)", "KiB"),
               ("write_lat_us", "8 B RDMA WRITE post -> completion, round robin", "us"),
               ("idle_cpu_percent", "CPU while idle with every QP open (target < 1 %)", "%"))
    for n in (2, 1000, 10000):
        runs = {name: [] for name, _, _ in metrics}
        seg = "/dev/shm/softverbs-bench-%d-scale" % os.getpid()
        cmd = [tool, n, IDLE_SECONDS]
        for _ in range(ARGS.per_round):
            if over_budget():
                break
            rc, out = run_one(cmd, env={"SOFTVERBS_DEVICE_PATH": seg}, timeout=120)
            remove_segment(seg)
            got = dict(re.findall(r"^metric (\S+) (\S+)", out, re.M))
            if rc != 0 or not all(name in got for name, _, _ in metrics):
                note_failure(cmdline(cmd), rc, out, "")
                continue
            for name, _, unit in metrics:
                v = float(got[name])
                runs[name].append(v / 1024 if unit == "KiB" else v)
        for name, label, unit in metrics:
            record("sv.scale.%d.%s" % (n, name), "softverbs %d RC QPs: %s" % (n, label), "softverbs-scale",
                   cmdline(cmd, env={"SOFTVERBS_DEVICE_PATH": "<segment>"}), runs[name], unit)


def callgrind_count(out_text):
    m = re.search(r"Collected : (\d+)", out_text)
    return int(m.group(1)) if m else None


def section_cost():
    """Instructions per message on the post -> completion path, counted by
    callgrind: the difference between two runs with different message
    counts, divided by the difference in messages, which cancels setup and
    teardown. 64 B on softverbs0 (bench/cost/msg_cost.cc, one process, fully
    deterministic: one run) and a 4 KiB WRITE on softverbs_roce0
    (bench/cost/roce_msg_cost.cc, requester and responder in two processes,
    each under its own callgrind; which thread takes a datagram varies a
    little from run to run, so --runs pairs and their median)."""
    print("softverbs: instructions per message (callgrind)", flush=True)
    tool = ARGS.build / "bin" / "sv_bench_msg_cost"
    if not tool.exists():
        skip("message cost", "%s is missing: build with -DSOFTVERBS_BENCH=ON" % tool)
        return
    if not have("valgrind"):
        skip("message cost", "valgrind is not installed (Debian package valgrind)")
        return
    small, large = 2000, 12000
    for op, label in (("write", "64 B RDMA WRITE, post -> completion"),
                      ("send", "64 B SEND + its RECV, post -> both completions")):
        counts = []
        for n in (small, large):
            seg = "/dev/shm/softverbs-bench-%d-cost" % os.getpid()
            cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", tool, op, n]
            rc, out = run_one(cmd, env={"SOFTVERBS_DEVICE_PATH": seg}, timeout=120)
            remove_segment(seg)
            got = callgrind_count(out)
            if rc != 0 or got is None:
                note_failure(cmdline(cmd), rc, out, "")
                break
            counts.append(got)
        values = [(counts[1] - counts[0]) / (large - small)] if len(counts) == 2 else []
        record("sv.cost.%s.64" % op, "softverbs host: instructions per %s" % label, "softverbs-cost",
               "valgrind --tool=callgrind %s %s {%d,%d} (difference / %d)" % (
                   os.path.relpath(tool, REPO), op, small, large, large - small),
               values, "instr")
    roce_cost()


ROCE_COST_BYTES = 4096


def roce_cost_once(tool, n, udp_port):
    """One responder + requester pair under callgrind, each a RoCE host on a
    loopback address; returns (requester, responder) instruction counts."""
    grind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    tcp_port = free_port()
    envs = []
    for end, addr in (("responder", "127.0.0.2"), ("requester", "127.0.0.3")):
        envs.append({"LD_LIBRARY_PATH": str(ARGS.lib), "SOFTVERBS_ROCE_ADDR": addr,
                     "SOFTVERBS_ROCE_PORT": str(udp_port), "SOFTVERBS_ROCE_MTU": "4096",
                     "SOFTVERBS_DEVICE_PATH": "/dev/shm/softverbs-bench-%d-cost-%s" % (os.getpid(), end)})
    server = grind + [tool, "responder", "127.0.0.2", tcp_port]
    client = grind + [tool, "requester", "127.0.0.2", tcp_port, n, ROCE_COST_BYTES]
    try:
        rc, out, sout = run_pair(server, client, envs[0], envs[1], timeout=180)
    finally:
        for e in envs:
            remove_segment(e["SOFTVERBS_DEVICE_PATH"])
    req, resp = callgrind_count(out), callgrind_count(sout)
    if rc != 0 or req is None or resp is None or "metric messages %d" % n not in out:
        note_failure(cmdline(client, envs[1]), rc, out, sout)
        return None
    return req, resp


def roce_cost():
    tool = ARGS.build / "bin" / "sv_bench_roce_msg_cost"
    if not tool.exists():
        skip("RoCE message cost", "%s is missing: build with -DSOFTVERBS_BENCH=ON" % tool)
        return
    small, large = 200, 1200
    udp_port = free_port()  # a TCP port free now; the UDP one of the same number is very likely free too
    runs = {"requester": [], "responder": [], "sum": []}
    for _ in range(ARGS.per_round):
        a = roce_cost_once(tool, small, udp_port)
        b = roce_cost_once(tool, large, udp_port) if a else None
        if a is None or b is None:
            continue
        req, resp = (b[0] - a[0]) / (large - small), (b[1] - a[1]) / (large - small)
        runs["requester"].append(req)
        runs["responder"].append(resp)
        runs["sum"].append(req + resp)
    what = {"requester": "the requester's process (post, ACK, CQ event, poll)",
            "responder": "the responder's process (receive, place, ACK)",
            "sum": "both processes"}
    for part in ("requester", "responder", "sum"):
        record("sv.cost.roce_write.%d.%s" % (ROCE_COST_BYTES, part),
               "softverbs RoCE: instructions per %s RDMA WRITE, %s" % (fmt_size(ROCE_COST_BYTES), what[part]),
               "softverbs-cost",
               "SOFTVERBS_ROCE_ADDR=127.0.0.{2,3} valgrind --tool=callgrind %s responder|requester ... {%d,%d} %d "
               "(difference / %d)" % (os.path.relpath(tool, REPO), small, large, ROCE_COST_BYTES, large - small),
               runs[part], "instr")


# Columns of the instruction-count history: (key, heading).
COST_HISTORY = [
    ("sv.cost.write.64", "host 64 B WRITE"),
    ("sv.cost.send.64", "host 64 B SEND+RECV"),
    ("sv.cost.roce_write.4096.requester", "RoCE 4 KiB WRITE, requester"),
    ("sv.cost.roce_write.4096.responder", "RoCE 4 KiB WRITE, responder"),
    ("sv.cost.roce_write.4096.sum", "RoCE 4 KiB WRITE, both"),
]


def render_cost_history(this_run, limit=8):
    """The instruction counts of the last full runs committed under
    bench/results/, oldest first, and this run's, so that a rise or fall
    from commit to commit shows."""
    rows = []
    for path in sorted((BENCH / "results").glob("*.json")):
        if path.name == this_run.name:
            continue
        try:
            d = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        m = d.get("measurements", {})
        if d.get("quick") or not any(k in m for k, _ in COST_HISTORY):
            continue
        rows.append((d.get("date", path.stem), d.get("machine", {}).get("git_commit", "?"),
                     [m.get(k, {}).get("median") for k, _ in COST_HISTORY]))
    rows = rows[-limit:]
    commit = DATA["machine"].get("git_commit", "?") + (" (with uncommitted changes)" if DATA["machine"].get("git_dirty") else "")
    rows.append(("this run", commit, [median(k) for k, _ in COST_HISTORY]))
    out = ["| run | commit | " + " | ".join(h for _, h in COST_HISTORY) + " |",
           "|---|---|" + "---|" * len(COST_HISTORY)]
    for date, commit, vals in rows:
        out.append("| %s | %s | %s |" % (date, commit, " | ".join(fmt(v, "instr") for v in vals)))
    return "\n".join(out)


def section_roce():
    print("softverbs RoCE between two network namespaces", flush=True)
    try:
        ns = Netns()
    except Exception as e:  # noqa: BLE001 - any failure means: no namespaces here
        skip("RoCE between namespaces, UCX tcp over the veth, UDP/TCP over the veth", str(e))
        return
    ARGS._roce = ns
    try:
        sv = (ARGS.lib / "libibverbs.so.1").exists() and have("ib_write_bw")
        udp = limit_bin("udp_rtt").exists()
        tcp = limit_bin("tcp_bw").exists()
        tcp_secs = "0.1" if ARGS.quick else "0.5"
        n_lat = 500 if ARGS.quick else 5000
        # Each softverbs figure right before the limit it is held against:
        # the machine's speed drifts within a round.
        for size in (65536, MIB):
            if sv:
                perftest_bw_both("sv.roce.ib_write_bw.%d.bw" % size, None, "softverbs RoCE ib_write_bw %s" % fmt_size(size),
                                 "softverbs-roce", "ib_write_bw", size, bw_iters(size, 20000, 128 * MIB, 100), roce=ns)
            if tcp:
                measure_limit_pair("limits.tcp_bw.veth" + ("" if size == MIB else ".%d" % size),
                                   "TCP stream, veth, %s writes" % fmt_size(size), "tcp_bw", [tcp_secs, str(size)],
                                   "GB/s", ns.addr_a, ns.ns_a, ns.ns_b, wait_server=True)
        if sv:
            perftest_lat_tail("sv.roce.ib_write_lat.8", "softverbs RoCE ib_write_lat 8 B", "softverbs-roce",
                              "ib_write_lat", 8, n_lat, roce=ns)
        if udp:
            measure_udp_half_rtt("limits.udp_half_rtt_block.veth", "raw UDP 8 B half round trip, veth, blocking recv",
                                 8, True, ns.addr_a, ns.ns_a, ns.ns_b)
            measure_udp_half_rtt("limits.udp_half_rtt_block.%d.veth" % ROCE_WRITE8_DATAGRAM,
                                 "raw UDP %d B (an 8 B WRITE's datagram) half round trip, veth, blocking recv"
                                 % ROCE_WRITE8_DATAGRAM, ROCE_WRITE8_DATAGRAM, True, ns.addr_a, ns.ns_a, ns.ns_b)
        if sv:
            perftest_lat_tail("sv.roce.ib_send_lat.8", "softverbs RoCE ib_send_lat 8 B", "softverbs-roce",
                              "ib_send_lat", 8, n_lat, roce=ns)
        if udp:
            measure_udp_half_rtt("limits.udp_half_rtt.veth", "raw UDP 8 B half round trip, veth, busy-polling",
                                 8, False, ns.addr_a, ns.ns_a, ns.ns_b)
        if sv:
            for size in (65536, MIB):
                perftest_bw_both("sv.roce_loss.ib_write_bw.%d.bw" % size, None,
                                 "softverbs RoCE ib_write_bw %s, SOFTVERBS_FAULTS=loss=0.001" % fmt_size(size),
                                 "softverbs-roce", "ib_write_bw", size, bw_iters(size, 20000, 128 * MIB, 100),
                                 roce=ns, faults="loss=0.001")
        if have("ucx_perftest"):
            measure_ucx("ucx.tcp_veth", "tcp over veth", "ucx-veth", "tcp",
                        ucx_suite(lat=True, small=False), ns_pair=(ns.ns_a, ns.ns_b), addr=ns.addr_a)
    finally:
        ns.down()


def main():
    global ARGS, TMP, HOST_SEGMENT
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="the build directory (lib/libibverbs.so.1, bin/sv_bench_*)")
    ap.add_argument("--quick", action="store_true",
                    help="a short smoke run: 1 run each, fewer iterations and sizes; writes under bench/results/tmp/")
    ap.add_argument("--runs", type=int, help="runs per figure (default 5; 1 with --quick)")
    ap.add_argument("--budget", type=float, default=780, help="seconds; later measurements are skipped past it")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per server+client pair")
    ap.add_argument("--only", default="host,ucx,mpi,fabric,limits,roce,cm,sweep,scale,cost",
                    help="comma-separated sections: host,ucx,mpi,fabric,limits,roce,cm,sweep,scale,cost")
    ap.add_argument("--publish", action="store_true",
                    help="with --quick: still write bench/results/ and docs/ (default: only bench/results/tmp/)")
    ARGS = ap.parse_args()
    ARGS.build = (REPO / ARGS.build).resolve() if not os.path.isabs(ARGS.build) else Path(ARGS.build)
    ARGS.lib = ARGS.build / "lib"
    ARGS.runs = ARGS.runs or (1 if ARGS.quick else 5)
    ARGS.per_round = 1
    ARGS._roce = None
    if ARGS.runs < 5 and not ARGS.quick:
        print("bench: --runs %d: the table wants medians of >= 5 runs" % ARGS.runs, file=sys.stderr)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    atexit.register(cleanup)
    now = datetime.datetime.now(datetime.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%SZ")
    TMP = BENCH / "results" / "tmp" / stamp
    TMP.mkdir(parents=True, exist_ok=True)
    HOST_SEGMENT = "/dev/shm/softverbs-bench-%d-host" % os.getpid()
    atexit.register(lambda: remove_segment(HOST_SEGMENT))
    SOFTVERBS_UCX_ENV.update({"SOFTVERBS_DEVICE_PATH": HOST_SEGMENT, "UCX_NET_DEVICES": "softverbs0:1"})

    argv = [os.path.relpath(sys.argv[0], REPO) if os.path.isabs(sys.argv[0]) else sys.argv[0]] + sys.argv[1:]
    DATA.update({"date": now.strftime("%Y-%m-%d %H:%M:%S UTC"), "command": "python3 " + " ".join(argv),
                 "make_target": os.environ.get("SOFTVERBS_BENCH_VIA", ""),
                 "runs_per_figure": ARGS.runs, "quick": ARGS.quick, "machine": machine(),
                 "sweep_sizes": [64, 65536, MIB] if ARGS.quick else [4 ** k for k in range(1, 12)]})
    only = set(ARGS.only.split(","))
    print("bench: %s, %d runs per figure, build %s" % (DATA["date"], ARGS.runs, ARGS.build), flush=True)
    # The compared figures in rounds, one run each per round; then what is
    # measured once (the sweep reuses the rounds' sizes; scale and cost are
    # their own repeats or deterministic).
    rounds = (("limits", section_limits), ("host", section_host), ("ucx", section_ucx_host), ("mpi", section_mpi),
              ("fabric", section_fabric), ("roce", section_roce), ("cm", section_cm))
    once = (("sweep", section_sweep), ("scale", section_scale), ("cost", section_cost))
    def run_sections(sections):
        for name, fn in sections:
            if name not in only:
                continue
            if over_budget():
                skip(name, "over the time budget (--budget %.0f s)" % ARGS.budget)
                continue
            fn()

    for r in range(ARGS.runs):
        print("bench: round %d of %d" % (r + 1, ARGS.runs), flush=True)
        ARGS.per_round = 1
        run_sections(rounds)
    ARGS.per_round = ARGS.runs
    run_sections(once)
    cleanup()

    DATA["machine"]["loadavg_end"] = list(os.getloadavg())
    DATA["comparisons"] = comparisons()
    DATA["wall_s"] = round(time.time() - T0, 1)
    publish = not ARGS.quick or ARGS.publish
    results = (BENCH / "results" if publish else TMP) / ("%s.json" % stamp)
    doc = REPO / "docs" / "PERFORMANCE.md" if publish else TMP / "PERFORMANCE.md"
    png = REPO / "docs" / "perf" / "bw_vs_size.png" if publish else TMP / "bw_vs_size.png"
    have_plot = plot(png)
    DATA["wall_s"] = round(time.time() - T0, 1)
    results.write_text(json.dumps(DATA, indent=1) + "\n")
    write_doc(doc, png if have_plot else None, results)
    print("\n" + render_table(DATA["comparisons"]))
    print("\nbench: %.0f s; wrote %s, %s%s" % (DATA["wall_s"], os.path.relpath(results, REPO),
                                              os.path.relpath(doc, REPO),
                                              ", " + os.path.relpath(png, REPO) if have_plot else ""))
    if not publish:
        print("bench: --quick: nothing under docs/ was changed")
    else:
        try:
            TMP.rmdir()  # the server logs are gone; an empty scratch folder is not kept
        except OSError:
            pass
    return 0


def write_doc(doc, png, results):
    m = DATA["machine"]
    tpl = (BENCH / "PERFORMANCE.md.in").read_text()
    command = DATA["command"]
    if DATA.get("make_target"):
        command = "%s (%s)" % (DATA["make_target"], command)
    skipped = "\n".join("- %s: %s" % (s["what"], s["why"]) for s in DATA["skipped"]) or "- nothing"
    notes = "\n".join("- " + n for n in DATA["notes"]) or "- none"
    subs = {
        "DATE": DATA["date"],
        "COMMAND": command,
        "RESULTS": os.path.relpath(results, REPO),
        "MACHINE": "%d CPUs, %s, Linux %s; load average %.2f at the start, %.2f at the end; softverbs %s%s; "
                   "perftest %s, ucx-utils %s, libfabric-bin %s" % (
                       m["nproc"], m["cpu_model"], m["kernel"], m["loadavg_start"][0], m["loadavg_end"][0],
                       m["git_commit"], " (with uncommitted changes)" if m["git_dirty"] else "",
                       m["packages"]["perftest"], m["packages"]["ucx-utils"], m["packages"]["libfabric-bin"]),
        "RUNS": str(DATA["runs_per_figure"]),
        "WALL": "%.0f" % DATA["wall_s"],
        "TABLE": render_table(DATA["comparisons"]),
        "PLOT": ("![bandwidth vs message size](%s)" % os.path.relpath(png, doc.parent)) if png else "(no plot)",
        "SWEEP": render_sweep(),
        "SOFTVERBS": render_group({"softverbs-host", "softverbs-roce", "softverbs-cm"}),
        "PEERS": render_group({"ucx", "ucx-veth", "fabric"}),
        "LIMITS": render_group({"limits"}),
        "SCALE": render_group({"softverbs-scale"}),
        "COST": render_group({"softverbs-cost"}),
        "COST_HISTORY": render_cost_history(results),
        "SKIPPED": skipped,
        "NOTES": notes,
    }
    for k, v in subs.items():
        tpl = tpl.replace("{{%s}}" % k, v)
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(tpl)


if __name__ == "__main__":
    sys.exit(main())
