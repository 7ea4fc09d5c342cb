#!/usr/bin/env bash
# The RoCEv2 traffic of Debian's ibv_rc_pingpong, ibv_xsrq_pingpong and perftest, unmodified,
# between two network namespaces, captured with dumpcap on namespace A's veth
# and checked packet by packet:
#   - tshark dissects every UDP/4791 datagram as InfiniBand, with no malformed
#     packet and no expert info of severity Warning or Error;
#   - the opcodes seen include RC SEND FIRST/MIDDLE/LAST/ONLY, RDMA WRITE
#     FIRST/MIDDLE/LAST, RDMA READ REQUEST and RESPONSE FIRST/MIDDLE/LAST,
#     COMPARE SWAP, FETCH ADD, ACKNOWLEDGE and ATOMIC ACKNOWLEDGE, and XRC SEND
#     FIRST/MIDDLE/LAST and ACKNOWLEDGE (tshark 4.0 names no XRC opcode, but
#     dissects the BTH; icrc_check.py checks their ICRC all the same);
#   - request PSNs, per (source, destination, destination QP) of one run,
#     advance by one per packet modulo 2^24 (a READ REQUEST by the number of
#     response packets it asks for). A request PSN that skips ahead fails; one
#     that goes back is a go-back-N retransmission (after a loss, or an ACK
#     timeout on a loaded machine), reported with the kernel's drop count but
#     allowed, as the spec allows it;
#   - UD multicast (ib_send_bw -c UD -g to an IPv4-mapped MGID): every
#     datagram goes to DestQP 0xFFFFFF at the group's IP address and the
#     Ethernet address IPv4 multicast maps it to (RFC 1112: 01:00:5e and
#     its low 23 bits), as from a RoCE NIC;
#   - icrc_check.py recomputes every ICRC independently of src/wire/icrc*.
#   capture.sh <dir of libibverbs.so.1>   (CAPTURE_KEEP=<dir> keeps the pcaps)
#   capture.sh --check <pcap>...          only the checks, on these captures
#                                         (each one run; no loss assumed)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 <dir of libibverbs.so.1> | --check <pcap>..." >&2; exit 2; }
if [ "$1" = --check ]; then shift; captures=("$@"); tools=(tshark)
else lib=$1; captures=(); tools=(dumpcap tshark ibv_rc_pingpong ibv_xsrq_pingpong ib_write_bw ib_read_bw ib_atomic_bw ib_send_bw); fi
for tool in "${tools[@]}"; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool is not installed (scripts/deps.sh)"; exit 77; }
done
python=/usr/bin/python3  # Debian's python3-scapy lives in its dist-packages
"$python" -c 'import scapy.contrib.roce' 2> /dev/null ||
  { echo "SKIP: $python cannot import scapy (python3-scapy, scripts/deps.sh)"; exit 77; }
work=$(mktemp -d)

mtu=1024
port=$(( 22000 + $$ % 20000 ))
run_no=0

# UDP datagrams the kernel could not deliver (full socket buffer, bad
# checksum: InErrors), both namespaces, IPv4 and IPv6, together.
udp_counter() {  # <namespace function> <counter name>...: their sum
  local ns=$1
  shift
  { $ns cat /proc/net/snmp; $ns cat /proc/net/snmp6; } | awk -v names="$*" '
    BEGIN { n = split(names, w, " "); for (i = 1; i <= n; ++i) { want[w[i]] = 1; want["Udp6" w[i]] = 1 } }
    $1 == "Udp:" && $2 == "InDatagrams" { for (i = 2; i <= NF; ++i) h[i] = $i; next }
    $1 == "Udp:" { for (i = 2; i <= NF; ++i) if (h[i] in want) s += $i; next }
    $1 in want { s += $2 }
    END { print s + 0 }'
}
udp_drops() { echo $(( $(udp_counter in_a InErrors) + $(udp_counter in_b InErrors) )); }
# Every UDP datagram namespace A sent or received (delivered or not).
udp_seen_a() { udp_counter in_a InDatagrams NoPorts InErrors OutDatagrams; }

# One run: its own capture file, device segments and TCP port.
#   run <name> <server addr> <client addr> <connect-to addr> <command...>
run() {
  local name=$1 addr_a=$2 addr_b=$3 peer=$4
  shift 4
  run_no=$(( run_no + 1 ))
  local pcap="$work/$run_no-$name.pcap" p=$(( port + run_no ))
  # Not through in_a: $! must be timeout itself (ip netns exec execs it), which
  # passes SIGINT on to dumpcap.
  ip netns exec "$NETNS_A" timeout 60 dumpcap -i "$veth_a" -f "udp port 4791" -P -w "$pcap" \
    > "$work/$run_no-dumpcap.out" 2>&1 &
  local cap=$!
  NETNS_PIDS+=("$cap")
  local i udp_before
  udp_before=$(udp_seen_a)
  for i in $(seq 100); do
    grep -qs "^Capturing on" "$work/$run_no-dumpcap.out" && break
    kill -0 "$cap" 2> /dev/null || break
    sleep 0.05
  done
  grep -q "^Capturing on" "$work/$run_no-dumpcap.out" || { cat "$work/$run_no-dumpcap.out"; echo "FAIL: dumpcap did not start"; exit 1; }

  local env_a=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$addr_a" SOFTVERBS_ROCE_MTU=$mtu
               SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cap-$$-$run_no-a "${run_env[@]}")
  local env_b=(LD_LIBRARY_PATH="$lib" SOFTVERBS_ROCE_ADDR="$addr_b" SOFTVERBS_ROCE_MTU=$mtu
               SOFTVERBS_DEVICE_PATH=/dev/shm/softverbs-itest-cap-$$-$run_no-b "${run_env[@]}")
  in_a env "${env_a[@]}" timeout 60 "$@" -p "$p" > "$work/server.out" 2>&1 &
  local server=$!
  NETNS_PIDS+=("$server")
  # The clients do not retry the TCP connect: start them once the server listens.
  wait_listen in_a "$p" "$server" || true
  local rc=0 srv=0
  in_b env "${env_b[@]}" timeout 60 "$@" -p "$p" "$peer" > "$work/client.out" 2>&1 || rc=$?
  wait "$server" || srv=$?
  # The kernel hands a packet to dumpcap when its TPACKET_V3 block is full or
  # retired (dumpcap's 250 ms timeout); what sits in an unretired block at
  # SIGINT is lost. dumpcap reports the count it has ("\rPackets: N"): wait
  # until that is every datagram namespace A's kernel counted (10 s at most;
  # the count check below says what is missing). SIGINT then makes dumpcap
  # write the rest and exit 0.
  local want have
  want=$(( $(udp_seen_a) - udp_before ))
  for i in $(seq 200); do
    have=$(tr '\r' '\n' < "$work/$run_no-dumpcap.out" | sed -n 's/^Packets: \([0-9]*\).*/\1/p' | tail -n 1)
    [ "${have:-0}" -ge "$want" ] && break
    sleep 0.05
  done
  # A GSO send is one datagram to the kernel's counters and several packets
  # to dumpcap: wait on until the count has stood still past a block's
  # retirement, so that none of its segments is left in an unretired block.
  local before=-1
  for i in $(seq 20); do
    [ "${have:-0}" = "$before" ] && break
    before=${have:-0}
    sleep 0.3
    have=$(tr '\r' '\n' < "$work/$run_no-dumpcap.out" | sed -n 's/^Packets: \([0-9]*\).*/\1/p' | tail -n 1)
  done
  kill -INT "$cap" 2> /dev/null || true
  local crc=0
  wait "$cap" || crc=$?
  if [ $rc -ne 0 ] || [ $srv -ne 0 ] || [ $crc -ne 0 ]; then
    echo "--- server"; cat "$work/server.out"; echo "--- client"; cat "$work/client.out"
    echo "--- dumpcap"; cat "$work/$run_no-dumpcap.out"
    echo "FAIL: $name: client $rc, server $srv, dumpcap $crc"; exit 1
  fi
  # "Packets received/dropped on interface 'va-N': 409/0 (pcap:0/dumpcap:0/flushed:0/ps_ifdrop:0)"
  local dropped
  dropped=$(sed -n "s|^Packets received/dropped on interface .*: [0-9]*/\([0-9]*\) (pcap:\([0-9]*\)/dumpcap:\([0-9]*\)/flushed:\([0-9]*\)/ps_ifdrop:\([0-9]*\)).*|\1 \2 \3 \4 \5|p" "$work/$run_no-dumpcap.out")
  if [ "$dropped" != "0 0 0 0 0" ]; then
    cat "$work/$run_no-dumpcap.out"; echo "FAIL: $name: dumpcap dropped packets (or its summary changed): '$dropped'"; exit 1
  fi
  # Nothing missed: the capture holds every datagram namespace A's kernel
  # counted (only softverbs speaks UDP there). The kernel counts a GSO send
  # from A once: its segments after the first (IPv4 identification 1, 2,
  # ...; a lone datagram has 0) are not in its count. A missed one of those
  # shows as a request PSN that skips ahead (below).
  local captured segments udp_a
  captured=$(tshark -n -r "$pcap" -Y "udp.port == 4791" 2> /dev/null | wc -l)
  segments=0
  [[ $addr_a == *:* ]] ||
    segments=$(tshark -n -r "$pcap" -Y "udp.port == 4791 && ip.src == $addr_a && ip.id != 0" 2> /dev/null | wc -l)
  udp_a=$(( $(udp_seen_a) - udp_before ))
  echo "$name: $captured packets captured ($segments later GSO segments from A); namespace A's kernel counted $udp_a UDP datagrams"
  [ $(( captured - segments )) -eq "$udp_a" ] || { echo "FAIL: $name: the capture is incomplete"; exit 1; }
  captures+=("$pcap")
}

if [ -n "${lib:-}" ]; then
  . "$here/netns.sh"
  netns_up
  veth_a="va-$$"  # netns.sh's end of the veth pair in namespace A
  # A veth carries a UDP GSO send (a burst's equal-sized packets, one
  # buffer) whole to the peer, so dumpcap would see one 64 KiB datagram.
  # One segment per skb makes each veth cut them as a NIC does: the capture
  # sees the packets of the wire, with the IPv4 identifications 0, 1, 2, ...
  # their ICRCs were computed for.
  ip -n "$NETNS_A" link set "$veth_a" gso_max_segs 1
  ip -n "$NETNS_B" link set "vb-$$" gso_max_segs 1
  cleanup() {
    netns_down
    if [ -n "${CAPTURE_KEEP:-}" ]; then mkdir -p "$CAPTURE_KEEP"; cp "$work"/*.pcap "$CAPTURE_KEEP"/ 2> /dev/null || true; fi
    rm -rf "$work"; rm -rf /dev/shm/softverbs-itest-cap-$$-*
  }
  trap cleanup EXIT

  drops_before=$(udp_drops)
  run_env=()
  pp=(ibv_rc_pingpong -d softverbs_roce0 -g 0 -m $mtu)
  pt=(-d softverbs_roce0 -x 0 -n 50)
  run pingpong-4096 "$ADDR_A" "$ADDR_B" "$ADDR_A" "${pp[@]}" -s 4096 -n 50  # SEND FIRST/MIDDLE/LAST
  run pingpong-1000 "$ADDR_A" "$ADDR_B" "$ADDR_A" "${pp[@]}" -s 1000 -n 20  # SEND ONLY
  # IPv6 has no identification to tell a GSO send's segments by, so the count
  # check above could not see them: this run sends each packet alone.
  run_env=(SOFTVERBS_ROCE_GSO=0)
  run pingpong-v6 "$ADDR6_A" "$ADDR6_B" "$ADDR_A" "${pp[@]}" -s 3000 -n 20  # IPv6 headers in the ICRC
  run_env=()
  run xsrq "$ADDR_A" "$ADDR_B" "$ADDR_A" ibv_xsrq_pingpong -d softverbs_roce0 -g 0 -m $mtu -s 3000 -n 20  # XRC
  run ib_write_bw "$ADDR_A" "$ADDR_B" "$ADDR_A" ib_write_bw "${pt[@]}" -s 4096
  run ib_read_bw "$ADDR_A" "$ADDR_B" "$ADDR_A" ib_read_bw "${pt[@]}" -s 4096
  run ib_atomic_bw-fadd "$ADDR_A" "$ADDR_B" "$ADDR_A" ib_atomic_bw "${pt[@]}" -A FETCH_AND_ADD
  run ib_atomic_bw-cas "$ADDR_A" "$ADDR_B" "$ADDR_A" ib_atomic_bw "${pt[@]}" -A CMP_AND_SWAP
  run ib_send_bw-ud-mcast "$ADDR_A" "$ADDR_B" "$ADDR_A" ib_send_bw "${pt[@]}" -c UD -g -s 512 \
    -M 0:0:0:0:0:0:0:0:0:0:255:255:239:1:130:7
  drops=$(( $(udp_drops) - drops_before ))
  echo "UDP datagrams the kernel dropped during the runs: $drops"
else
  trap 'rm -rf "$work"' EXIT
  drops=0
fi

# tshark 4.0 (Debian 12) decodes UDP 4791 as InfiniBand by default; say so anyway.
ts() { timeout 60 tshark -n -d udp.port==4791,infiniband "$@" 2> "$work/tshark.err" || { cat "$work/tshark.err"; echo "FAIL: tshark $*"; exit 1; }; }
fail=0
total=0
declare -A seen=()
for pcap in "${captures[@]}"; do
  name=$(basename "$pcap" .pcap)
  # One dissection for the counts, the opcodes and the PSNs (tab-separated:
  # UDP ports, the InfiniBand protocol, opcode, IPv4/IPv6 source and
  # destination, destination QP, PSN, DMA length), one for the warnings.
  ts -r "$pcap" -T fields -E separator=/t -E occurrence=f -e udp.srcport -e udp.dstport \
     -e infiniband -e infiniband.bth.opcode -e ip.src -e ipv6.src -e ip.dst -e ipv6.dst \
     -e infiniband.bth.destqp -e infiniband.bth.psn -e infiniband.reth.dmalen > "$work/fields.txt"
  read -r all udp ib bth < <(awk -F '\t' '{ all++ } $1 == 4791 || $2 == 4791 { udp++ } $3 != "" { ib++ }
                                         $4 != "" { bth++ } END { print all + 0, udp + 0, ib + 0, bth + 0 }' "$work/fields.txt")
  total=$(( total + udp ))
  if [ "$udp" -eq 0 ] || [ "$udp" -ne "$all" ] || [ "$ib" -ne "$udp" ] || [ "$bth" -ne "$udp" ]; then
    echo "FAIL: $name: $all frames, $udp UDP/4791, $ib InfiniBand, $bth with a BTH"; fail=1
  fi
  bad=$(ts -r "$pcap" -Y '_ws.malformed || _ws.expert.severity >= "Warning"')
  if [ -n "$bad" ]; then
    echo "FAIL: $name: malformed or expert warnings/errors:"; echo "$bad" | head -20
    ts -r "$pcap" -q -z expert,warn | head -40; fail=1
  fi
  while read -r op; do seen[$op]=1; done < <(awk -F '\t' '$4 != "" { print $4 }' "$work/fields.txt" | sort -u)
  if [[ $name == *mcast* ]]; then
    # The group ::ffff:239.1.130.7: IP 239.1.130.7, MAC 01:00:5e:01:82:07.
    wrong=$(ts -r "$pcap" -T fields -E separator=/t -e eth.dst -e ip.dst -e infiniband.bth.destqp \
              -e infiniband.deth.srcqp | awk -F '\t' '$1 != "01:00:5e:01:82:07" || $2 != "239.1.130.7" ||
                                                    $3 != "0xffffff" || $4 == ""' | head -5)
    [ -z "$wrong" ] || { echo "FAIL: $name: not to the group (eth dst, ip dst, dest QP, DETH src QP):"; echo "$wrong"; fail=1; }
  fi

  # PSNs, per direction and destination QP (fields: ip src, ip dst, dest QP,
  # opcode, PSN, DMA length).
  awk -F '\t' '{ print ($5 != "" ? $5 : $6), ($7 != "" ? $7 : $8), $9, $4, $10, $11 }' "$work/fields.txt" > "$work/psn.txt"
  if ! awk -v mtu=$mtu -v drops="$drops" -v name="$name" '
      function response(op) { return (op >= 13 && op <= 18) }  # READ RESPONSE *, ACK, ATOMIC ACK
      {
        src = $1; dst = $2; qp = $3; op = ($4 + 0) % 32; psn = $5 + 0; len = $6 + 0  # XRC: RC code + 0xA0
        key = src ">" dst "/" qp
        if (response(op)) {
          if (key in rlast) {
            d = (psn - rlast[key] + 16777216) % 16777216
            if (d == 0 || d >= 8388608) { printf "%s: response PSN %d after %d (%s)\n", name, psn, rlast[key], key; back++ }
          }
          rlast[key] = psn; nresp++
          next
        }
        if (key in next_psn && psn != next_psn[key]) {
          d = (psn - next_psn[key] + 16777216) % 16777216
          if (d < 8388608) { printf "%s: request PSN %d, expected %d: skipped ahead (%s)\n", name, psn, next_psn[key], key; gap++ }
          else { printf "%s: request PSN %d, expected %d: retransmission (%s)\n", name, psn, next_psn[key], key; back++ }
        }
        span = 1
        if (op == 12 && len > mtu) span = int((len + mtu - 1) / mtu)  # RDMA READ REQUEST
        next_psn[key] = (psn + span) % 16777216; nreq++
      }
      END {
        printf "%s: %d requests, %d responses; PSN gaps %d, PSNs going back %d\n", name, nreq, nresp, gap, back
        if (back > 0) printf "%s: %d retransmissions (UDP datagrams the kernels dropped: %d)\n", name, back, drops
        if (gap > 0) exit 1
      }' "$work/psn.txt"; then
    echo "FAIL: $name: PSN sequence"; fail=1
  fi
done

# Opcodes (IBA table 38, RC and UD): each must appear somewhere in the captures.
declare -A want=([0]="SEND FIRST" [1]="SEND MIDDLE" [2]="SEND LAST" [4]="SEND ONLY"
  [6]="RDMA WRITE FIRST" [7]="RDMA WRITE MIDDLE" [8]="RDMA WRITE LAST" [12]="RDMA READ REQUEST"
  [13]="RDMA READ RESPONSE FIRST" [14]="RDMA READ RESPONSE MIDDLE" [15]="RDMA READ RESPONSE LAST"
  [17]="ACKNOWLEDGE" [18]="ATOMIC ACKNOWLEDGE" [19]="COMPARE SWAP" [20]="FETCH ADD" [100]="UD SEND ONLY"
  [160]="XRC SEND FIRST" [161]="XRC SEND MIDDLE" [162]="XRC SEND LAST" [177]="XRC ACKNOWLEDGE")
for op in $(printf '%s\n' "${!want[@]}" | sort -n); do
  if [ -n "${seen[$op]:-}" ]; then echo "opcode $op (${want[$op]}): seen"
  else echo "FAIL: opcode $op (${want[$op]}) not in the captures"; fail=1; fi
done
for op in "${!seen[@]}"; do
  [ "$op" -le 31 ] || [ "$op" -eq 100 ] || { [ "$op" -ge 160 ] && [ "$op" -le 183 ]; } ||
    { echo "FAIL: opcode $op is not an RC, XRC or UD SEND ONLY opcode"; fail=1; }
done
echo "opcodes seen: $(printf '%s\n' "${!seen[@]}" | sort -n | tr '\n' ' ')"
echo "$total RoCEv2 packets in ${#captures[@]} captures"

timeout 120 "$python" "$here/icrc_check.py" "${captures[@]}" || fail=1
[ $fail -eq 0 ] || { echo FAIL; exit 1; }
echo PASS
