# Sourced by the VL arbitration tests (tests/conformance/qos_arbitration.sh on
# softverbs0, tests/roce/qos_arbitration.sh between namespaces): the share
# of a paced link two flows on SL0 (VL0) and SL2 (VL2) got over a window.
# The caller defines fail(), sl_words NAME (PortXmitDataSL of SL0 and SL2
# now, as "a b") and LINK_GBPS (the paced link's data rate).

# window NAME SECONDS WANT: over the next SECONDS, SL0 (VL0) must have had
# WANT of what both sent, within 10 % of WANT (or 0.05 absolute, whichever
# is larger), and together they must have stayed within the link's rate.
window() {
  local a0 a2 b0 b2 t0 t1
  read -r a0 a2 < <(sl_words "$1.before")
  t0=$(date +%s%N)
  sleep "$2"
  read -r b0 b2 < <(sl_words "$1.after")
  t1=$(date +%s%N)
  python3 - "$1" $(( b0 - a0 )) $(( b2 - a2 )) $(( t1 - t0 )) "$3" "$LINK_GBPS" <<'PY' || fail "$1: shares"
import sys
name, w0, w2, ns, want, link = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6])
gbps = (w0 + w2) * 32 / ns
share0 = w0 / (w0 + w2) if w0 + w2 else 0.0
print("%s: VL0 %.3f, VL2 %.3f of %.3f Gb/s (want VL0 %.2f)" % (name, share0, 1 - share0, gbps, want))
# Pacing never lets more than the link's data rate through. On RoCE the PMA
# counts the datagrams from the BTH on, the pacer IBA's LRH-to-VCRC bytes:
# the same within a percent at 64 KiB messages.
if gbps > link * 1.05:
    sys.exit("faster than the link: %.3f Gb/s" % gbps)
if gbps < link * 0.3:
    sys.exit("the flows hardly ran: %.3f Gb/s" % gbps)
if abs(share0 - want) > max(0.1 * want, 0.05):
    sys.exit("VL0 had %.3f of the link, not %.2f" % (share0, want))
PY
}
