#!/usr/bin/python3
"""rdma-core's pyverbs (Debian's python3-pyverbs), unmodified, creates the
objects of issue 18 on softverbs0 through our libibverbs.so.1: each check
builds an object the way pyverbs' own tests do and fails on any exception
(issue 18: "MWs, XRC domains and SRQs raise EOPNOTSUPP in pyverbs"), and
posts an ATOMIC WRITE through QPEx.wr_atomic_write (issue 18, item 5).

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


def atomic_write(ctx, pd):
    """QPEx.wr_atomic_write (IBA 1.5 ATOMIC WRITE) between two RC QPs of ctx."""
    import struct
    import time
    from pyverbs.addr import AHAttr
    from pyverbs.cq import CQ
    from pyverbs.mr import MR
    from pyverbs.qp import QPAttr, QPCap, QPEx, QPInitAttrEx
    cq = CQ(ctx, 16)
    init = QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, pd=pd,
                        cap=QPCap(max_send_wr=4, max_recv_wr=4, max_send_sge=1, max_recv_sge=1),
                        comp_mask=e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
                        send_ops_flags=e.IBV_QP_EX_WITH_ATOMIC_WRITE)
    a, b = QPEx(ctx, init), QPEx(ctx, init)
    lid = ctx.query_port(1).lid
    for me, peer in ((a, b), (b, a)):
        attr = QPAttr(port_num=1)
        attr.qp_access_flags = e.IBV_ACCESS_REMOTE_WRITE
        me.to_init(attr)
        attr = QPAttr(port_num=1)
        attr.dest_qp_num = peer.qp_num
        attr.ah_attr = AHAttr(dlid=lid, port_num=1)
        attr.path_mtu = e.IBV_MTU_1024
        attr.max_dest_rd_atomic = 1
        attr.min_rnr_timer = 12
        attr.rq_psn = 0
        me.to_rtr(attr)
        attr.timeout, attr.retry_cnt, attr.rnr_retry, attr.sq_psn, attr.max_rd_atomic = 14, 7, 7, 0, 1
        me.to_rts(attr)
    with MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE) as mr:
        mr.write(b"\0" * 64, 64)
        a.wr_start()
        a.wr_id = 7
        a.wr_flags = e.IBV_SEND_SIGNALED
        a.wr_atomic_write(mr.rkey, mr.buf + 8, struct.pack("<Q", 0x1122334455667788))
        a.wr_complete()
        deadline = time.monotonic() + 10
        n, wcs = cq.poll()
        while n == 0:
            assert time.monotonic() < deadline, "no completion in 10 s"
            n, wcs = cq.poll()
        wc = wcs[0]
        assert (wc.status, wc.opcode, wc.wr_id) == (e.IBV_WC_SUCCESS, e.IBV_WC_ATOMIC_WRITE, 7), \
            (wc.status, wc.opcode, wc.wr_id)
        assert mr.read(8, 8) == struct.pack("<Q", 0x1122334455667788), mr.read(16, 0).hex()
        assert mr.read(8, 0) == b"\0" * 8 and mr.read(48, 16) == b"\0" * 48
    for qp in (a, b):
        qp.close()
    cq.close()


CHECKS = {"srq": srq, "parent_domain": parent_domain, "memory_window": memory_window,
          "xrc_domain": xrc_domain, "device_memory": device_memory, "atomic_write": atomic_write}


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
