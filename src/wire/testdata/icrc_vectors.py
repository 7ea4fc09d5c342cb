#!/usr/bin/python3
"""Golden RoCEv2 datagrams for src/wire/icrc_test.cc and roce_udp_test.cc.

Independent of the C++ code: the ICRC is recomputed here with zlib from the
RoCEv2 annex description (8 x 0xFF, masked IP/UDP/BTH, rest of packet,
CRC-32 stored little-endian), the same rule written the way Linux rxe writes
it (seed 0xdebb20e3, raw reflected CRC, final complement), and — for IPv4 —
by scapy.contrib.roce (Debian python3-scapy). All three must agree; the
datagram bytes are printed as C++ arrays.

Run: /usr/bin/python3 src/wire/testdata/icrc_vectors.py  (prints the arrays of
icrc_vectors.h; its header comment is kept by hand)
"""
import struct
import sys
import zlib


def icrc_annex(dgram):
    """ICRC per the annex: dgram is IP header .. last ICRC byte."""
    d = bytearray(dgram[:-4])
    if d[0] >> 4 == 4:
        ihl = (d[0] & 0xF) * 4
        d[1] = 0xFF                  # TOS
        d[8] = 0xFF                  # TTL
        d[10:12] = b"\xff\xff"       # header checksum
    else:
        ihl = 40
        d[0] |= 0x0F                 # traffic class (high nibble)
        d[1:4] = b"\xff\xff\xff"     # traffic class (low) + flow label
        d[7] = 0xFF                  # hop limit
    d[ihl + 6:ihl + 8] = b"\xff\xff"  # UDP checksum
    d[ihl + 8 + 4] = 0xFF            # BTH F/B/resv6 byte
    return zlib.crc32(b"\xff" * 8 + bytes(d)) & 0xFFFFFFFF


def icrc_rxe_style(dgram):
    """The same rule as the kernel phrases it: a raw reflected CRC register."""
    def raw(seed, data):  # crc32_le without pre/post inversion
        return zlib.crc32(data, seed ^ 0xFFFFFFFF) ^ 0xFFFFFFFF
    d = bytearray(dgram[:-4])
    v4 = d[0] >> 4 == 4
    ihl = (d[0] & 0xF) * 4 if v4 else 40
    if v4:
        d[8] = 0xFF
        d[10:12] = b"\xff\xff"
        d[1] = 0xFF
    else:
        d[1:4] = b"\xff\xff\xff"
        d[0] = (d[0] & 0xF0) | 0x0F
        d[7] = 0xFF
    d[ihl + 6:ihl + 8] = b"\xff\xff"
    d[ihl + 8 + 4] = 0xFF
    crc = raw(0xDEBB20E3, bytes(d))
    return (~crc) & 0xFFFFFFFF


def inet_sum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def bth(opcode, pad, pkey, dqpn, ackreq, psn, se=0, fecn=0, becn=0):
    return struct.pack("!BBHBBHBBH", opcode, se << 7 | pad << 4, pkey,
                       fecn << 7 | becn << 6, dqpn >> 16, dqpn & 0xFFFF,
                       ackreq << 7, psn >> 16, psn & 0xFFFF)


def ipv4_udp(ib, src, dst, ident, tos, ttl, sport):
    total = 20 + 8 + len(ib)
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, tos, total, ident, 0x4000, ttl, 17,
                      0, bytes(src), bytes(dst))
    hdr = hdr[:10] + struct.pack("!H", 0xFFFF - inet_sum(hdr)) + hdr[12:]
    return hdr + struct.pack("!HHHH", sport, 4791, 8 + len(ib), 0)


def ipv6_udp(ib, src, dst, tc, flow, hop, sport):
    ulen = 8 + len(ib)
    hdr = struct.pack("!IHBB16s16s", 6 << 28 | tc << 20 | flow, ulen, 17, hop,
                      bytes(src), bytes(dst))
    udp = struct.pack("!HHHH", sport, 4791, ulen, 0)
    pseudo = bytes(src) + bytes(dst) + struct.pack("!IxxxB", ulen, 17)
    return hdr, udp, pseudo


def finish_v4(head, ib_no_icrc):
    dg = head + ib_no_icrc + b"\0\0\0\0"
    icrc = icrc_annex(dg)
    assert icrc == icrc_rxe_style(dg)
    return head + ib_no_icrc + struct.pack("<I", icrc)


def scapy_v4(ib_no_icrc, src, dst, ident, tos, ttl, sport):
    from scapy.all import IP, UDP, Raw, raw
    from scapy.contrib.roce import BTH
    pkt = (IP(src=".".join(map(str, src)), dst=".".join(map(str, dst)), id=ident,
              flags="DF", tos=tos, ttl=ttl) /
           UDP(sport=sport, dport=4791, chksum=0) /
           BTH(ib_no_icrc[:12] + ib_no_icrc[12:] + b"\0\0\0\0"))
    pkt[BTH].icrc = None  # let scapy compute it
    pkt[BTH].remove_payload()
    pkt[BTH].add_payload(Raw(ib_no_icrc[12:]))
    return raw(pkt)


def carray(name, b):
    rows = [", ".join("0x%02x" % x for x in b[i:i + 12]) for i in range(0, len(b), 12)]
    return ("constexpr uint8_t %s[] = {\n    " % name + ",\n    ".join(rows) + ",\n};")


def main():
    src4, dst4 = [192, 168, 1, 1], [192, 168, 1, 2]
    out = []

    # 1. IPv4 RC SEND ONLY, 5-byte payload "hello" + 3 pad bytes.
    ib1 = bth(0x04, 3, 0xFFFF, 0x000011, 1, 0x123456) + b"hello" + b"\0\0\0"
    v1 = finish_v4(ipv4_udp(ib1 + b"\0" * 4, src4, dst4, 0x1234, 0x00, 64, 0xC000), ib1)
    out.append(("kV4SendOnly", v1))

    # 2. IPv4 RC RDMA WRITE ONLY WITH IMMEDIATE (RETH + ImmDt), 16-byte payload.
    reth = struct.pack("!QII", 0x00007F0012345678, 0xCAFEBABE, 16)
    imm = struct.pack("!I", 0xDEADBEEF)
    ib2 = bth(0x0B, 0, 0x8001, 0xABCDEF, 1, 0xFFFFFF, se=1) + reth + imm + bytes(range(16))
    v2 = finish_v4(ipv4_udp(ib2 + b"\0" * 4, [10, 0, 0, 1], [10, 0, 0, 2], 0xBEEF, 0x68, 17,
                            0xD00D), ib2)
    out.append(("kV4WriteOnlyImm", v2))

    # 2b. The same packet after a switch marked ECN CE, decremented TTL and the
    # BTH F/B bits changed: variant fields only, so the ICRC must not change.
    m = bytearray(v2)
    m[1] = 0x6B
    m[8] = 3
    m[10:12] = b"\0\0"
    m[10:12] = struct.pack("!H", 0xFFFF - inet_sum(bytes(m[:20])))
    m[28 + 4] = 0xC0
    assert icrc_annex(bytes(m)) == struct.unpack("<I", v2[-4:])[0]
    out.append(("kV4WriteOnlyImmMarked", bytes(m)))

    # 3. IPv6 UD SEND ONLY WITH IMMEDIATE (DETH + ImmDt), 7-byte payload + 1 pad.
    deth = struct.pack("!IBBH", 0x11111111, 0, 0x00, 0x0042)
    ib3 = (bth(0x65, 1, 0xFFFF, 0x000001, 0, 0x000100) + deth + struct.pack("!I", 0x01020304)
           + b"payload" + b"\0")
    src6 = bytes.fromhex("fe800000000000000211 22fffe334455".replace(" ", ""))
    dst6 = bytes.fromhex("fe80000000000000021122fffe336677")
    hdr, udp, pseudo = ipv6_udp(ib3 + b"\0" * 4, src6, dst6, 0x1A, 0xABCDE, 255, 0xE123)
    dg = hdr + udp + ib3 + b"\0\0\0\0"
    icrc = icrc_annex(dg)
    assert icrc == icrc_rxe_style(dg)
    dg = hdr + udp + ib3 + struct.pack("<I", icrc)
    csum = 0xFFFF - inet_sum(pseudo + dg[40:])
    csum = csum or 0xFFFF
    dg = dg[:46] + struct.pack("!H", csum) + dg[48:]
    assert inet_sum(pseudo + dg[40:]) == 0xFFFF
    out.append(("kV6UdSendOnlyImm", dg))

    # 5. IPv4 RC ATOMIC WRITE (IBA 1.5, opcode 0x1D): RETH (length 8) and the
    # eight bytes to store; no pad.
    reth5 = struct.pack("!QII", 0x00007F00DEADBEE8, 0x00A1B2C3, 8)
    ib5 = bth(0x1D, 0, 0xFFFF, 0x000123, 1, 0x000ABC) + reth5 + struct.pack("!Q", 0x0123456789ABCDEF)
    v5 = finish_v4(ipv4_udp(ib5 + b"\0" * 4, src4, dst4, 0x2345, 0x00, 64, 0xC001), ib5)
    out.append(("kV4AtomicWrite", v5))

    # 6. Its answer, as Linux rxe sends it: RDMA READ RESPONSE ONLY with an
    # AETH (ACK, credits 0x1f, MSN 1) and no payload, the request's PSN.
    ib6 = bth(0x10, 0, 0xFFFF, 0x000456, 0, 0x000ABC) + struct.pack("!I", 0x1F << 24 | 1)
    v6 = finish_v4(ipv4_udp(ib6 + b"\0" * 4, dst4, src4, 0x0042, 0x00, 64, 0xC002), ib6)
    out.append(("kV4AtomicWriteResponse", v6))

    # 7. IPv4 RC FLUSH (IBA 1.5, opcode 0x1C) as Linux rxe lays it out: BTH,
    # FETH (placement global visibility, selectivity range), RETH; no payload.
    feth7 = struct.pack("!I", 0 << 4 | 1)
    reth7 = struct.pack("!QII", 0x00007F00DEADB000, 0x00A1B2C3, 4096)
    ib7 = bth(0x1C, 0, 0xFFFF, 0x000123, 1, 0x000ABD) + feth7 + reth7
    v7 = finish_v4(ipv4_udp(ib7 + b"\0" * 4, src4, dst4, 0x2346, 0x00, 64, 0xC001), ib7)
    out.append(("kV4Flush", v7))

    # scapy.contrib.roce cross-check for the IPv4 vectors (ICRC and IP checksum).
    try:
        for name, v, sport in (("kV4SendOnly", v1, 0xC000),):
            s = scapy_v4(ib1, src4, dst4, 0x1234, 0x00, 64, sport)
            assert s == v, (name, s.hex(), v.hex())
        s = scapy_v4(ib2, [10, 0, 0, 1], [10, 0, 0, 2], 0xBEEF, 0x68, 17, 0xD00D)
        assert s == v2, ("kV4WriteOnlyImm", s.hex(), v2.hex())
        s = scapy_v4(ib5, src4, dst4, 0x2345, 0x00, 64, 0xC001)
        assert s == v5, ("kV4AtomicWrite", s.hex(), v5.hex())
        s = scapy_v4(ib6, dst4, src4, 0x0042, 0x00, 64, 0xC002)
        assert s == v6, ("kV4AtomicWriteResponse", s.hex(), v6.hex())
        s = scapy_v4(ib7, src4, dst4, 0x2346, 0x00, 64, 0xC001)
        assert s == v7, ("kV4Flush", s.hex(), v7.hex())
        # UDP checksums: scapy computes them from its own pseudo headers.
        from scapy.all import IP, IPv6, UDP, Raw, raw
        s6 = raw(IPv6(src="fe80::211:22ff:fe33:4455", dst="fe80::211:22ff:fe33:6677", tc=0x1A,
                      fl=0xABCDE, hlim=255) / UDP(sport=0xE123, dport=4791) / Raw(dg[48:]))
        assert s6 == dg, ("kV6UdSendOnlyImm", s6.hex(), dg.hex())
        s4 = raw(IP(src="192.168.1.1", dst="192.168.1.2", id=0x1234, flags="DF", ttl=64) /
                 UDP(sport=0xC000, dport=4791) / Raw(v1[28:]))
        assert s4[:26] == v1[:26] and s4[28:] == v1[28:]
        out.append(("kV4SendOnlyUdpChecksum", s4))
        print("// scapy agrees with every vector", file=sys.stderr)
    except ImportError:
        print("// scapy not installed: IPv4 vectors not cross-checked", file=sys.stderr)

    for name, v in out:
        print(carray(name, v))


if __name__ == "__main__":
    main()
