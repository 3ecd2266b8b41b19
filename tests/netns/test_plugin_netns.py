#!/usr/bin/env python3
"""The net plugin between two simulated nodes (issue 6: loopback and namespaces).

  test_plugin_netns.py TEST_PLUGIN_NET

Creates two network namespaces joined by two rails (netns_cluster.Cluster: veth links rail0 and rail1,
each on its own bridge and subnet) and runs two parts of TEST_PLUGIN_NET with its receiver process in
node 1's namespace and its sender in node 0's, so every connection and message crosses between them:

  1. `PluginNet/Conformance.AcrossNamespaces/*` (v8..v11) on device rail0;
  2. `PluginNet/VirtualDevice.AcrossNamespaces/*` (v9..v11) with devices rail0 and rail1 grouped by
     makeVDevice; connection c runs on rail c % 2, so afterwards both of node 1's links must have
     received at least the 4 MiB messages meant for them (two per rail and version);
  3. `PluginNet/Stripes.AcrossNamespaces/*` (v9..v11) on the same virtual device: one connection whose
     large messages are striped over both rails, so each of node 1's links must have received at least
     0.45 of what the three runs sent (the test itself checks every byte and the sender's counters).

Exit 0 when every test passed (none skipped), 1 on failure, 77 where namespaces cannot be created.
"""
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster as nc  # noqa: E402
from netns_bench import skipped  # noqa: E402

MESSAGE = 4 << 20
# What one run of PluginNet/Stripes.AcrossNamespaces sends striped with the default threshold (128 KiB):
# the sizes 128K, 128K+1, 1M+7, 4M and 16M; sixteen 1 MiB messages; sixteen of 1 MiB - k into one buffer;
# 512K and 256K+3 grouped; 16M, 256K and 1M+5 sent before their receives; 512K after a failed receive.
# The message too large for its receive is cut there, so it is left out.
STRIPED = ((128 << 10) * 2 + 1 + (1 << 20) + 7 + (4 << 20) + (16 << 20) + 16 * (1 << 20) + 16 * (1 << 20) - 120
           + (512 << 10) + (256 << 10) + 3 + (16 << 20) + (256 << 10) + (1 << 20) + 5 + (512 << 10))


def run_part(c, binary, gtest_filter, domains, expected):
    env = dict(os.environ,
               CONFLUX_PLUGIN_TEST_NETNS_RECEIVER=c.node_ns(1),
               CONFLUX_PLUGIN_TEST_NETNS_SENDER=c.node_ns(0),
               CONFLUX_OFI_DOMAINS=domains,
               CONFLUX_OFI_PROVIDER="tcp;ofi_rxm")
    res = subprocess.run([binary, "--gtest_filter=" + gtest_filter], env=env, capture_output=True, text=True,
                         timeout=600)
    out = res.stdout + res.stderr
    passed = re.search(r"\[  PASSED  \] (\d+) test", out)
    if res.returncode != 0 or not passed or int(passed.group(1)) != expected or "[  SKIPPED ]" in out:
        print(out[-6000:])
        print("%s across namespaces: FAILED (exit %d)" % (gtest_filter, res.returncode))
        return False
    print(out[-1200:])
    return True


def rails_carried(before, after, want, part):
    deltas = [a - b for a, b in zip(after, before)]
    print("receiver's links during the %s part: rail0 %d bytes, rail1 %d bytes (each needs >= %d)" % (
        part, deltas[0], deltas[1], want))
    if min(deltas) < want:
        print("%s part across namespaces: FAILED (a rail carried too little)" % part)
        return False
    return True


def rx_bytes(c, node, iface):
    p = c.run_in(node, ["cat", "/sys/class/net/%s/statistics/rx_bytes" % iface], check=True)
    return int(p.stdout.strip())


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    if skipped():
        return 77
    with nc.cleanup_on_signals(), nc.Cluster(nodes=2, ranks_per_node=1, rails="2") as c:
        if not run_part(c, binary, "PluginNet/Conformance.AcrossNamespaces/*", c.iface(0), 4):
            return 1
        before = [rx_bytes(c, 1, c.iface(k)) for k in (0, 1)]
        if not run_part(c, binary, "PluginNet/VirtualDevice.AcrossNamespaces/*",
                        "%s,%s" % (c.iface(0), c.iface(1)), 3):
            return 1
        after = [rx_bytes(c, 1, c.iface(k)) for k in (0, 1)]
        if not rails_carried(before, after, 3 * 2 * MESSAGE, "virtual-device"):  # 3 versions, 2 connections per rail
            return 1
        before = after
        if not run_part(c, binary, "PluginNet/Stripes.AcrossNamespaces/*", "%s,%s" % (c.iface(0), c.iface(1)), 3):
            return 1
        after = [rx_bytes(c, 1, c.iface(k)) for k in (0, 1)]
        if not rails_carried(before, after, int(0.45 * 3 * STRIPED), "striping"):
            return 1
    print("plugin across namespaces: conformance v8..v11 on rail0, virtual device rail0+rail1 v9..v11, one "
          "connection striped over both: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
