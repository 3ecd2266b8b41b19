#!/usr/bin/env python3
"""The net plugin's conformance suite between two simulated nodes (issue 6: loopback and namespaces).

  test_plugin_netns.py TEST_PLUGIN_NET

Creates two network namespaces joined by a veth link (netns_cluster.Cluster), then runs the
`PluginNet/Conformance.AcrossNamespaces/*` tests of TEST_PLUGIN_NET (v8..v11): its receiver process
enters node 1's namespace and its sender node 0's, so every connection and message crosses the link
between them (device `rail0` in both). Exit 0 when all four versions passed (not skipped), 1 on failure,
77 where namespaces cannot be created.
"""
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns_cluster as nc  # noqa: E402
from netns_bench import skipped  # noqa: E402


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    if skipped():
        return 77
    with nc.cleanup_on_signals(), nc.Cluster(nodes=2, ranks_per_node=1) as c:
        env = dict(os.environ,
                   CONFLUX_PLUGIN_TEST_NETNS_RECEIVER=c.node_ns(1),
                   CONFLUX_PLUGIN_TEST_NETNS_SENDER=c.node_ns(0),
                   CONFLUX_OFI_DOMAINS=c.iface(0),
                   CONFLUX_OFI_PROVIDER="tcp;ofi_rxm")
        res = subprocess.run([binary, "--gtest_filter=PluginNet/Conformance.AcrossNamespaces/*"], env=env,
                             capture_output=True, text=True, timeout=600)
    out = res.stdout + res.stderr
    passed = re.search(r"\[  PASSED  \] (\d+) test", out)
    if res.returncode != 0 or not passed or int(passed.group(1)) != 4 or "[  SKIPPED ]" in out:
        print(out[-6000:])
        print("plugin conformance across namespaces: FAILED (exit %d)" % res.returncode)
        return 1
    print(out[-1500:])
    print("plugin conformance across namespaces (v8..v11, receiver in %s, sender in %s): ok" % (
        c.node_ns(1), c.node_ns(0)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
