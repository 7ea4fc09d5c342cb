#!/usr/bin/python3
"""rdma-core's pyverbs (Debian's python3-pyverbs), unmodified, creates the
objects of issue 18 on softverbs0 through our libibverbs.so.1: each check
builds an object the way pyverbs' own tests do and fails on any exception
(issue 18: "MWs, XRC domains and SRQs raise EOPNOTSUPP in pyverbs").

  pyverbs_objects.py CHECK...   (exit 0: every check passed)
"""
import atexit
import os
import shutil
import sys
import tempfile

# A device of its own, removed at exit (read when pyverbs first opens it).
if "SOFTVERBS_DEVICE_PATH" not in os.environ:
    SEGMENT = "/dev/shm/softverbs-conf-pyverbs-%d" % os.getpid()
    os.environ["SOFTVERBS_DEVICE_PATH"] = SEGMENT
    atexit.register(lambda: (os.path.exists(SEGMENT) and os.unlink(SEGMENT),
                             shutil.rmtree(SEGMENT + ".sysfs", ignore_errors=True)))

import pyverbs.enums as e  # noqa: E402 (after the environment)
from pyverbs.device import Context  # noqa: E402
from pyverbs.pd import PD, ParentDomain, ParentDomainInitAttr  # noqa: E402


def srq(ctx, pd):
    from pyverbs.srq import SRQ, SrqInitAttr, SrqAttr
    attr = SrqInitAttr(SrqAttr(max_wr=16, max_sge=1))
    with SRQ(pd, attr) as q:
        q.modify(SrqAttr(srq_limit=4), e.IBV_SRQ_LIMIT)
        assert q.query().srq_limit == 4


def parent_domain(ctx, pd):
    from pyverbs.pd import ParentDomainContext
    pd_ctx = ParentDomainContext(pd, lambda pd, ctx, size, align, resource: e.IBV_ALLOCATOR_USE_DEFAULT,
                                 lambda pd, ctx, ptr, resource: None)
    attr = ParentDomainInitAttr(pd=pd, pd_context=pd_ctx)
    with ParentDomain(ctx, attr=attr):
        pass


def memory_window(ctx, pd):
    from pyverbs.mr import MW
    for kind in (e.IBV_MW_TYPE_1, e.IBV_MW_TYPE_2):
        with MW(pd, kind):
            pass


def xrc_domain(ctx, pd):
    from pyverbs.xrcd import XRCD, XRCDInitAttr
    with tempfile.NamedTemporaryFile() as f:
        attr = XRCDInitAttr(e.IBV_XRCD_INIT_ATTR_FD | e.IBV_XRCD_INIT_ATTR_OFLAGS, os.O_CREAT, f.fileno())
        with XRCD(ctx, attr):
            pass


def device_memory(ctx, pd):
    from pyverbs.device import AllocDmAttr, DM
    with DM(ctx, AllocDmAttr(length=4096)) as dm:
        dm.copy_to_dm(0, b"softverbs" * 8, 72)
        assert dm.copy_from_dm(0, 72) == b"softverbs" * 8


CHECKS = {"srq": srq, "parent_domain": parent_domain, "memory_window": memory_window,
          "xrc_domain": xrc_domain, "device_memory": device_memory}


def main():
    names = sys.argv[1:] or sorted(CHECKS)
    failed = 0
    with Context(name="softverbs0") as ctx, PD(ctx) as pd:
        for name in names:
            try:
                CHECKS[name](ctx, pd)
                print("PASS: pyverbs %s" % name)
            except Exception as exc:  # pylint: disable=broad-except
                print("FAIL: pyverbs %s: %s" % (name, exc))
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
