#!/usr/bin/env python3
"""A/B of two builds of libibverbs.so.1 on the host device softverbs0.

    bench/ab.py A_LIBDIR B_LIBDIR [--rounds N] [--quick]

Runs Debian's perftest through each library in alternating rounds (each round
runs every case once with A and once with B, the order flipped every round),
so that both sample the same minutes of a machine whose speed drifts, and
prints the medians per case, their ratio B/A and the median of the per-round
ratios (robust to the machine changing speed between rounds). Latency in us (lower is
better), message rate in Mpps and bandwidth in GB/s (higher is better).
A change that claims "no speed lost" shows ratios within the spread of the
rounds. Uses only localhost; every process is waited for or killed.
"""
import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20

# (name, tool, size, iterations, figure): figure 'lat' = t_typical (us),
# 'mpps' = message rate, 'gbs' = bandwidth.
CASES = [
    ("write_lat 8 B", "ib_write_lat", 8, 20000, "lat"),
    ("send_lat 8 B", "ib_send_lat", 8, 20000, "lat"),
    ("read_lat 8 B", "ib_read_lat", 8, 20000, "lat"),
    ("write_bw 64 B", "ib_write_bw", 64, 200000, "mpps"),
    ("send_bw 64 B", "ib_send_bw", 64, 200000, "mpps"),
    ("write_bw 1 MiB", "ib_write_bw", MIB, 3000, "gbs"),
    ("read_bw 1 MiB", "ib_read_bw", MIB, 3000, "gbs"),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def parse(out, figure):
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if "#bytes" not in line:
            continue
        for row in lines[i + 1:]:
            f = row.split()
            if len(f) >= 5 and f[0].isdigit():
                if figure == "lat":
                    return float(f[4])
                return float(f[4]) if figure == "mpps" else float(f[3]) * MIB / 1e9
        break
    return None


def run_case(lib, tool, size, iters, figure, timeout=120):
    seg = "/dev/shm/softverbs-ab-%d-%d" % (os.getpid(), free_port())
    env = dict(os.environ, LD_LIBRARY_PATH=lib, SOFTVERBS_DEVICE_PATH=seg)
    opts = ["-d", "softverbs0", "-p", str(free_port()), "-F", "-n", str(iters), "-s", str(size)]
    with tempfile.TemporaryFile("w+") as log:
        server = subprocess.Popen([tool] + opts, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + timeout
            out = ""
            while time.time() < deadline:
                client = subprocess.run([tool] + opts + ["localhost"], env=env, capture_output=True, text=True,
                                        timeout=max(1, deadline - time.time()))
                out = client.stdout + client.stderr
                if client.returncode == 0 or not re.search("Couldn't connect", out) or server.poll() is not None:
                    break
                time.sleep(0.1)
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            out = "timed out"
        finally:
            if server.poll() is None:
                server.kill()
                server.wait()
            if os.path.exists(seg):
                os.unlink(seg)
    value = parse(out, figure)
    if value is None:
        print("  failed: %s %s through %s: %s" % (tool, size, lib, out.strip().splitlines()[-1:] or "?"),
              file=sys.stderr, flush=True)
    return value


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="the folder holding A's libibverbs.so.1 (the base)")
    ap.add_argument("b", help="the folder holding B's libibverbs.so.1 (the change)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="a tenth of the iterations, 2 rounds")
    args = ap.parse_args()
    rounds = 2 if args.quick else args.rounds
    runs = {(c[0], side): [] for c in CASES for side in "ab"}
    pairs = {c[0]: [] for c in CASES}  # per round B/A: the two ran minutes apart at most
    for r in range(rounds):
        order = "ab" if r % 2 == 0 else "ba"
        for name, tool, size, iters, figure in CASES:
            got = {}
            for side in order:
                lib = args.a if side == "a" else args.b
                v = run_case(os.path.abspath(lib), tool, size, max(100, iters // 10) if args.quick else iters, figure)
                if v is not None:
                    runs[(name, side)].append(v)
                    got[side] = v
            if len(got) == 2 and got["a"] > 0:
                pairs[name].append(got["b"] / got["a"])
        print("round %d/%d done" % (r + 1, rounds), flush=True)
    print("\n| case | A (median) | B (median) | B/A of medians | median of per-round B/A | A runs | B runs |")
    print("|---|---|---|---|---|---|---|")
    failed = False
    for name, _, _, _, figure in CASES:
        a, b = runs[(name, "a")], runs[(name, "b")]
        if not a or not b:
            failed = True
            print("| %s | %s | %s | - | - | | |" % (name, a or "failed", b or "failed"))
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        unit = {"lat": "us", "mpps": "Mpps", "gbs": "GB/s"}[figure]
        fmt = lambda xs: " ".join("%.3g" % x for x in xs)
        paired = statistics.median(pairs[name]) if pairs[name] else float("nan")
        print("| %s | %.3g %s | %.3g %s | %.2f | %.2f | %s | %s |" % (name, ma, unit, mb, unit, mb / ma, paired, fmt(a),
                                                                 fmt(b)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
