#!/usr/bin/env python3
"""The layers of src/ include only what their rules allow (docs/DESIGN.md, "Layers").

Usage: include_graph.py [REPO_ROOT]   (default: two folders above this script)

Top to bottom:

    abi/       the C ABI; nothing outside abi/ includes it. abi/rdmacm
               (librdmacm.so.1) includes only cm, wire and util: it is a
               separate library over the public verbs
    cm/        the RDMA CM engine: wire, util, shm/gsi_table.h and
               verbs/cq_counts.h only (it reaches the device through
               <infiniband/verbs.h>, and of verbs/ reads only a CQ's counts)
    verbs/     may include transport, wire, shm, util, and of fabric/ only its
               face (fabric/fabrics.h, fabric/device_host.h) -- never a
               fabric; the port's configuration is the verbs layer's own
    fabric/    plug-ins under transport: host/, udp/ and fake/ (the scripted
               link of the protocol tests) implement transport/link.h and may
               include the common part of fabric/ (fabrics.h, device_host.h,
               fault/; fabrics.cc is the one place that names them all),
               transport, wire, shm, util; never each other, never verbs
    transport/ may include wire, shm, util; it defines the Link it sends
               through (transport/link.h), so it includes nothing of fabric/
    mad/       the management agents (SMA, PMA): may include verbs (for what
               the port reports), wire, shm, util; only abi/ includes it
    wire/      only wire        shm/  shm and util        util/  only util

An include resolves as the compiler resolves it: "x.h" beside the including
file first, then under src/. System headers (<...> that are not under src/)
are not checked. Test code (*_test.cc, and */testing/ helpers) follows the
rules of its folder; only test code, and code outside src/, may include a
*/testing/ header. Outside src/ (tools/, tests/, bench/, examples/) the one rule is that
nothing includes src/abi/.

KNOWN_VIOLATIONS lists, exactly, the violations the code has today. The check
fails on any violation not listed, AND on any listed one that is gone: when
an entry is fixed, delete it here, so the list only shrinks.
"""
import os
import re
import sys

# (including file, included header), repo paths. Each is a real
# violation, kept only until the code is restructured; delete an entry when
# its include goes away (the check says so).
KNOWN_VIOLATIONS = set()  # none left

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SOURCE_EXT = (".h", ".hh", ".hpp", ".c", ".cc", ".cpp", ".inc")

FABRIC_COMMON = "fabric-common"  # fabrics.h, device_host.h, fault/

# component -> components it may include (besides itself).
ALLOWED = {
    "abi": {"mad", "verbs", "transport", "wire", "shm", "util"},
    "mad": {"verbs", "wire", "shm", "util"},
    "abi/rdmacm": {"cm", "wire", "util"},
    "cm": {"wire", "util"},
    "verbs": {"transport", "wire", "shm", "util"},
    FABRIC_COMMON: {"transport", "wire", "shm", "util"},
    "fabric/host": {FABRIC_COMMON, "transport", "wire", "shm", "util"},
    "fabric/udp": {FABRIC_COMMON, "transport", "wire", "shm", "util"},
    "fabric/fake": {FABRIC_COMMON, "transport", "wire", "shm", "util"},
    # fabric/fabrics.cc: the registry, the one file that names every fabric.
    "fabric-registry": {FABRIC_COMMON, "fabric/host", "fabric/udp", "transport", "wire", "shm", "util"},
    "transport": {"wire", "shm", "util"},
    "wire": set(),
    "shm": {"util"},
    "util": set(),
}
# Single headers of another component that a component may include.
# The face of the fabrics the verbs layer uses (fabric/fabrics.h: pick a link,
# registration and service-thread hooks; device_host.h: what the device
# offers them).
FABRICS = {"fabric/fabrics.h", "fabric/device_host.h"}
ALLOWED_FILES = {
    "abi": FABRICS,
    "verbs": FABRICS,
    # The table QP1's datagrams are routed by, which the CM fills; a CQ's
    # produced and consumed counts (cm/held_disconnect.h).
    "cm": {"shm/gsi_table.h", "verbs/cq_counts.h"},
}


def component(rel):
    """The layer of a path relative to src/, or None when it is in none."""
    parts = rel.split("/")
    if rel == "fabric/fabrics.cc":
        return "fabric-registry"
    if rel.startswith("abi/rdmacm/"):
        return "abi/rdmacm"
    if parts[0] == "fabric":
        if len(parts) > 2 and parts[1] in ("host", "udp", "fake"):
            return "fabric/" + parts[1]
        return FABRIC_COMMON
    if parts[0] in ALLOWED:
        return parts[0]
    return None


def is_test(rel):
    name = os.path.basename(rel)
    return name.endswith("_test.cc") or "/testing/" in "/" + rel


def resolve(root, including, kind, name):
    """The included file as a path relative to the repo, or None (system header)."""
    candidates = []
    if kind == '"':
        candidates.append(os.path.join(os.path.dirname(including), name))
    candidates.append(os.path.join("src", name))
    for c in candidates:
        path = os.path.normpath(c)
        if os.path.isfile(os.path.join(root, path)):
            return path
    return None


def sources(root, top):
    for d, dirs, files in os.walk(os.path.join(root, top)):
        dirs.sort()
        for f in sorted(files):
            if f.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(d, f), root)


def includes(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as fh:
        for line in fh:
            m = INCLUDE.match(line)
            if m:
                yield m.group(1), m.group(2)


def violation(inc_rel, hdr_rel):
    """Why src/inc_rel may not include src/hdr_rel, or None when it may."""
    a, b = component(inc_rel), component(hdr_rel)
    if "/testing/" in "/" + hdr_rel and not is_test(inc_rel):
        return "only test code may include a testing/ header"
    if a is None or b is None:
        return None if a == b else "outside the known layers (add it to include_graph.py)"
    if a == b:
        return None
    if b in ALLOWED[a] or hdr_rel in ALLOWED_FILES.get(a, set()):
        return None
    return "%s may not include %s" % (a, b)


def check(root):
    found = {}  # (file, header), repo paths -> why
    for path in sources(root, "src"):
        rel = os.path.relpath(path, "src")
        for kind, name in includes(root, path):
            target = resolve(root, path, kind, name)
            if target is None:
                if kind == '"':
                    found[(path, name)] = "does not resolve to a file (quoted include)"
                continue
            if not target.startswith("src" + os.sep):
                continue
            why = violation(rel, os.path.relpath(target, "src"))
            if why:
                found[(path, target)] = why
    for top in ("tools", "tests", "bench", "examples"):
        if not os.path.isdir(os.path.join(root, top)):
            continue
        for path in sources(root, top):
            for kind, name in includes(root, path):
                target = resolve(root, path, kind, name)
                if target and target.startswith(os.path.join("src", "abi") + os.sep):
                    found[(path, target)] = "nothing outside abi/ includes abi/"
    return found


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    if not os.path.isdir(os.path.join(root, "src")):
        print("include_graph: no src/ under %s" % root)
        return 2
    found = check(root)
    new = sorted(k for k in found if k not in KNOWN_VIOLATIONS)
    gone = sorted(k for k in KNOWN_VIOLATIONS if k not in found)
    for f, h in new:
        print("include_graph: NEW violation: %s includes %s (%s)" % (f, h, found[(f, h)]))
    for f, h in gone:
        print("include_graph: fixed, delete it from KNOWN_VIOLATIONS in tests/structure/include_graph.py: "
              "%s -> %s" % (f, h))
    if new or gone:
        return 1
    print("include_graph: ok (%d known violations left)" % len(KNOWN_VIOLATIONS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
