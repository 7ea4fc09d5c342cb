#!/usr/bin/env python3
"""The ECE vendor ID of the first CM REQ or REP in a `tshark -x` hex dump
on stdin (RoCEv2 over IPv4: the MAD starts 62 bytes into the frame), as
Linux's cm.c places it: REQ message bytes 5..7; REP one byte after each of
the QPN, EECN and PSN (message bytes 15, 19, 23). Prints 0x%06x."""
import re
import sys

MAD = 14 + 20 + 8 + 12 + 8  # Ethernet, IPv4, UDP, BTH, DETH
MSG = MAD + 24              # after the common MAD header

frame = bytearray()
for line in sys.stdin:
    m = re.match(r"^([0-9a-f]{4})  ((?:[0-9a-f]{2} ){1,16})", line)
    if m is None:
        if frame:
            break  # the first frame only
        continue
    frame += bytes.fromhex(m.group(2).replace(" ", ""))
if len(frame) < MSG + 24:
    sys.exit("no CM message in the dump")
if sys.argv[1] == "req":
    vendor = int.from_bytes(frame[MSG + 5:MSG + 8], "big")
else:
    vendor = frame[MSG + 15] << 16 | frame[MSG + 19] << 8 | frame[MSG + 23]
print(f"0x{vendor:06x}")
