#!/usr/bin/python3
"""Independent ICRC check of a RoCEv2 capture.

    icrc_check.py <capture.pcap> [more.pcap ...]

For every UDP datagram to port 4791 the ICRC (the last 4 bytes of the UDP
payload) is recomputed from the captured bytes and compared:

  * our own implementation of IBA annex A17.3.3 (RoCEv2): CRC-32 over
    8 bytes of 0xff (the masked LRH stand-in), then the IP header with its
    variant fields set to 1s (IPv4: TOS, TTL, header checksum; IPv6: traffic
    class, flow label, hop limit), the UDP header with its checksum set to 1s,
    the BTH with its 8 variant bits (FECN, BECN, resv6 -- IBA's resv8a) set to
    1s, and the rest of the packet up to the ICRC; sent least significant byte
    first.  Nothing here comes from softverbs' src/wire/icrc*.
  * for IPv4, also scapy's (scapy.contrib.roce.BTH.compute_icrc, which does
    not support IPv6) as a second opinion.

Prints the counts; exits 1 on any mismatch, on a truncated packet, or when
there is no RoCEv2 packet at all.
"""
import struct
import sys
import zlib

from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.utils import PcapReader
from scapy.contrib.roce import BTH

ROCE_PORT = 4791
BTH_LEN = 12


def own_icrc(ip_hdr: bytes, version: int, udp_and_rest: bytes) -> bytes:
    """ICRC of one RoCEv2 packet: ip_hdr is the IP header as captured,
    udp_and_rest the UDP header, BTH, ... , ICRC."""
    ip = bytearray(ip_hdr)
    if version == 4:
        ip[1] = 0xFF               # TOS (DSCP + ECN)
        ip[8] = 0xFF               # TTL
        ip[10:12] = b"\xff\xff"    # header checksum
    else:
        ip[0] |= 0x0F              # traffic class, high nibble
        ip[1:4] = b"\xff\xff\xff"  # traffic class, low nibble + flow label
        ip[7] = 0xFF               # hop limit
    rest = bytearray(udp_and_rest[:-4])
    rest[6:8] = b"\xff\xff"        # UDP checksum
    rest[8 + 4] = 0xFF             # BTH byte 4: FECN, BECN, resv6
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(rest)) & 0xFFFFFFFF
    return struct.pack("<I", crc)


def check(paths):
    counts = {"v4": 0, "v6": 0, "ok": 0, "bad": 0, "scapy_ok": 0, "scapy_bad": 0}
    for path in paths:
        with PcapReader(path) as reader:
            for frame_no, pkt in enumerate(reader, start=1):
                if UDP not in pkt or pkt[UDP].dport != ROCE_PORT:
                    continue
                where = f"{path} frame {frame_no}"
                wirelen = getattr(pkt, "wirelen", None)
                if wirelen is not None and wirelen != len(pkt):
                    print(f"{where}: truncated capture ({len(pkt)} of {wirelen} bytes)")
                    counts["bad"] += 1
                    continue
                if IP in pkt:
                    version, ip_layer = 4, pkt[IP]
                    raw_ip = bytes(ip_layer)
                    ip_hdr = raw_ip[: ip_layer.ihl * 4]
                    ip_total = ip_layer.len
                    if ip_layer.frag != 0 or ip_layer.flags.MF:
                        print(f"{where}: IPv4 fragment")
                        counts["bad"] += 1
                        continue
                elif IPv6 in pkt:
                    version, ip_layer = 6, pkt[IPv6]
                    raw_ip = bytes(ip_layer)
                    if ip_layer.nh != 17:
                        print(f"{where}: IPv6 extension headers are not handled")
                        counts["bad"] += 1
                        continue
                    ip_hdr = raw_ip[:40]
                    ip_total = 40 + ip_layer.plen
                else:
                    continue
                counts[f"v{version}"] += 1
                # The IP datagram without Ethernet padding.
                udp_and_rest = raw_ip[len(ip_hdr):ip_total]
                udp_len = struct.unpack("!H", udp_and_rest[4:6])[0]
                if udp_len != len(udp_and_rest) or udp_len < 8 + BTH_LEN + 4:
                    print(f"{where}: UDP length {udp_len}, datagram {len(udp_and_rest)}")
                    counts["bad"] += 1
                    continue
                wire = udp_and_rest[-4:]
                mine = own_icrc(ip_hdr, version, udp_and_rest)
                opcode, psn = udp_and_rest[8], struct.unpack("!I", udp_and_rest[16:20])[0] & 0xFFFFFF
                if mine == wire:
                    counts["ok"] += 1
                else:
                    counts["bad"] += 1
                    print(f"{where}: ICRC mismatch (opcode {opcode:#04x}, PSN {psn}): "
                          f"on the wire {wire.hex()}, computed {mine.hex()}")
                if version == 4:
                    # scapy: re-dissect the datagram so that BTH sits on UDP.
                    # (A failure of scapy itself is reported as a mismatch.)
                    try:
                        again = IP(raw_ip[:ip_total])
                        theirs = again[BTH].compute_icrc(None) if BTH in again else None
                    except Exception as exc:  # pragma: no cover
                        theirs = None
                        print(f"{where}: scapy failed: {exc!r}")
                    if theirs == wire:
                        counts["scapy_ok"] += 1
                    else:
                        counts["scapy_bad"] += 1
                        print(f"{where}: scapy's ICRC {theirs.hex() if theirs else None} "
                              f"!= wire {wire.hex()}")
    total = counts["v4"] + counts["v6"]
    print(f"icrc_check: {total} RoCEv2 packets ({counts['v4']} IPv4, {counts['v6']} IPv6): "
          f"{counts['ok']} ICRC ok, {counts['bad']} bad; "
          f"scapy (IPv4): {counts['scapy_ok']} ok, {counts['scapy_bad']} bad")
    if total == 0:
        print("icrc_check: FAIL: no RoCEv2 packet in the capture")
        return 1
    if counts["bad"] or counts["scapy_bad"]:
        print("icrc_check: FAIL")
        return 1
    print("icrc_check: PASS")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(check(sys.argv[1:]))
