#!/usr/bin/env python3
"""Small network probes that netns_cluster.py runs inside a node's namespace (`ip netns exec NS python3
netns_probes.py ...`), so that no ping or iperf binary is needed. Standard library only.

  netns_probes.py ping ADDR [--timeout 2]              exit 0 on an ICMP echo reply (raw socket: root)
  netns_probes.py tcp-sink --bind ADDR --port P        prints "ready", then "<bytes> <seconds>" at EOF
  netns_probes.py tcp-source --to ADDR --port P [--seconds 1]
"""
import argparse
import os
import socket
import struct
import sys
import time


def _icmp_checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def icmp_ping(addr, timeout=2.0):
    """One ICMP echo to @p addr. True on a reply from it."""
    ident = os.getpid() & 0xFFFF
    with socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP) as s:
        payload = b"netns-cluster"
        hdr = struct.pack("!BBHHH", 8, 0, 0, ident, 1)
        pkt = struct.pack("!BBHHH", 8, 0, _icmp_checksum(hdr + payload), ident, 1) + payload
        try:
            s.sendto(pkt, (addr, 0))
        except OSError:  # no route (the link is down on this side)
            return False
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            s.settimeout(max(0.01, end - time.monotonic()))
            try:
                data, src = s.recvfrom(2048)
            except socket.timeout:
                break
            ihl = (data[0] & 0x0F) * 4
            typ, _code, _ck, rid, _seq = struct.unpack("!BBHHH", data[ihl:ihl + 8])
            if typ == 0 and rid == ident and src[0] == addr:
                return True
    return False


def tcp_sink(bind, port):
    """Accepts one connection, reads to EOF and prints the byte count and the seconds from the first to the
    last byte (the receiver's view of the rate)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as ls:
        ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        ls.bind((bind, port))
        ls.listen(1)
        ls.settimeout(30)
        print("ready", flush=True)
        conn, _ = ls.accept()
        with conn:
            conn.settimeout(60)
            total, first, last = 0, None, None
            buf = bytearray(1 << 20)
            while True:
                n = conn.recv_into(buf)
                if n == 0:
                    break
                last = time.monotonic()
                if first is None:
                    first = last
                total += n
    print(total, max((last or 0) - (first or 0), 1e-9), flush=True)


def tcp_source(to, port, seconds):
    """Sends zeros for @p seconds, then waits until the sink has read everything and closed."""
    with socket.create_connection((to, port), timeout=30) as s:
        block = b"\0" * (1 << 16)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            s.sendall(block)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)


def main(argv=None):
    ap = argparse.ArgumentParser(description="network probes run inside a simulated node")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("ping")
    p.add_argument("addr")
    p.add_argument("--timeout", type=float, default=2.0)
    p = sub.add_parser("tcp-sink")
    p.add_argument("--bind", required=True)
    p.add_argument("--port", type=int, required=True)
    p = sub.add_parser("tcp-source")
    p.add_argument("--to", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=float, default=1.0)
    a = ap.parse_args(argv)
    if a.cmd == "ping":
        return 0 if icmp_ping(a.addr, a.timeout) else 1
    if a.cmd == "tcp-sink":
        tcp_sink(a.bind, a.port)
    else:
        tcp_source(a.to, a.port, a.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
