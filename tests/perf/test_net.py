#!/usr/bin/python3
"""conflux-perf net: the raw transport and the net plugin measured side by side, and its bad flags.

  test_net.py CONFLUX_PERF PLUGIN_SO|none

Runs a short sweep of --raw and --plugin PLUGIN_SO between two forked ranks and checks that every size
has one row per target in command-line order, with positive latency and bandwidths, ratios against the
first target that match its own columns, and #wrong 0 (the bytes exchanged are compared). Then checks
that bad flags and libraries that are not plugins fail with a message naming them. Without a plugin
(a build without libfabric) it checks the clear error of --raw and reports "skipped" (exit 77).
"""

import os
import subprocess
import sys

SKIP = 77
failures = []


def fail(ctx, msg):
    failures.append("%s: %s" % (ctx, msg))


def run(args, timeout=240):
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def rows_of(stdout):
    rows = []
    for line in stdout.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        rows.append(line.split())
    return rows


def check_sweep(perf, plugin):
    sizes = [8, 4096, 2097152]
    p = run([perf, "net", "--raw", "--plugin", plugin, "-b", "8", "-e", "2M", "-f", "512", "--repeats", "2", "-n", "4"])
    if p is None:
        fail("sweep", "timed out")
        return
    if p.returncode != 0:
        fail("sweep", "exit %d: %s" % (p.returncode, p.stderr[-2000:]))
        return
    if "[0] raw" not in p.stdout or "[1] plugin" not in p.stdout:
        fail("sweep", "header does not name both targets:\n" + p.stdout)
    rows = rows_of(p.stdout)
    if len(rows) != 2 * len(sizes):
        fail("sweep", "expected %d rows, got %d:\n%s" % (2 * len(sizes), len(rows), p.stdout))
        return
    for i, size in enumerate(sizes):
        raw, plug = rows[2 * i], rows[2 * i + 1]
        ctx = "size %d" % size
        if [int(raw[0]), int(plug[0])] != [size, size]:
            fail(ctx, "rows are for sizes %s and %s" % (raw[0], plug[0]))
        if raw[1] != "raw" or plug[1] != "Conflux":
            fail(ctx, "targets %s, %s (expected raw, then the plugin's name Conflux)" % (raw[1], plug[1]))
        for r in (raw, plug):
            lat, uni, bidir = map(float, r[2:5])
            # At 8 B the bandwidths print as 0.000 GB/s when a busy machine stretches the batch.
            if not (lat > 0 and (size < 4096 or (uni > 0 and bidir > 0))):
                fail(ctx, "non-positive figures in %r" % (r,))
            if r[-1] != "0":
                fail(ctx, "#wrong is %s in %r" % (r[-1], r))
        if raw[5:8] != ["-", "-", "-"]:
            fail(ctx, "the baseline's comparison columns should be '-': %r" % (raw,))
        added = float(plug[5])
        if abs(added - (float(plug[2]) - float(raw[2]))) > 0.02:
            fail(ctx, "+lat_us %s is not the latency difference" % plug[5])
        for col, ratio_col in ((3, 6), (4, 7)):
            if float(raw[col]) < 0.1:
                continue  # printed with 3 decimals: too few digits for the ratio
            expected = float(plug[col]) / float(raw[col])
            if abs(float(plug[ratio_col]) - expected) > 0.02 + 0.02 * expected:
                fail(ctx, "ratio %s, columns give %.3f" % (plug[ratio_col], expected))
    if "every checked byte was right" not in p.stdout:
        fail("sweep", "no closing line")


def check_merge(perf, plugin):
    """--merge 0,1 on two loopback devices: a second target on the virtual device, striped, bytes checked."""
    env = dict(os.environ, CONFLUX_OFI_DOMAINS="lo,lo")
    p = subprocess.run([perf, "net", "--plugin", plugin, "--merge", "0,1", "-b", "1M", "-e", "1M", "--repeats", "1",
                        "-n", "2"], capture_output=True, text=True, timeout=240, env=env)
    rows = rows_of(p.stdout)
    if p.returncode != 0 or [r[1] for r in rows] != ["Conflux", "Conflux[0+1]"] or any(r[-1] != "0" for r in rows):
        fail("merge", "exit %d, rows %r: %s" % (p.returncode, rows, p.stderr[-800:]))
    if '"lo+lo"' not in p.stdout:
        fail("merge", "the header does not name the virtual device lo+lo:\n" + p.stdout)


def check_bad(perf, plugin, args, code, needle):
    p = run([perf, "net"] + args, timeout=120)
    ctx = "net %s" % " ".join(args)
    if p is None:
        fail(ctx, "timed out")
    elif p.returncode != code or needle not in p.stderr:
        fail(ctx, "expected exit %d and %r in stderr, got %d: %s" % (code, needle, p.returncode, p.stderr[-800:]))


def main():
    perf, plugin = sys.argv[1], sys.argv[2]
    if plugin == "none":
        check_bad(perf, plugin, ["--raw", "-e", "8"], 1, "libfabric")
        if failures:
            print("\n".join(failures))
            return 1
        print("skipped: no libfabric in this build, so neither the raw transport nor the net plugin exists")
        return SKIP
    check_sweep(perf, plugin)
    check_bad(perf, plugin, ["--version", "7"], 2, "--version")
    check_bad(perf, plugin, ["--ranks", "3"], 2, "--ranks")
    check_bad(perf, plugin, ["--dir", "up"], 2, "--dir")
    check_bad(perf, plugin, ["-b", "1M", "-e", "1K"], 2, "--maxbytes")
    check_bad(perf, plugin, ["--plugin", "/nonexistent/libnccl-net-x.so"], 2, "/nonexistent/libnccl-net-x.so")
    check_bad(perf, plugin, ["--plugin", plugin, "--device", "99", "-e", "8"], 1, "--device 99")
    # A shared library that is not an ncclNet plugin.
    check_bad(perf, plugin, ["--plugin", "libc.so.6", "-e", "8"], 1, "no ncclNetPlugin")
    check_bad(perf, plugin, ["--merge", "0,1"], 2, "--merge: expected a --plugin before it")
    for bad_list in ("0", "0,0", "0,x", "0,1,2,3,4", "0,"):
        check_bad(perf, plugin, ["--plugin", plugin, "--merge", bad_list], 2, "--merge: expected 2 to 4")
    check_bad(perf, plugin, ["--plugin", plugin, "--version", "8", "--merge", "0,1", "-e", "8"], 1, "v9 or later")
    check_merge(perf, plugin)
    if failures:
        print("\n".join(failures))
        return 1
    print("conflux-perf net: sweep, merged devices and %d bad-flag cases passed" % 14)
    return 0


if __name__ == "__main__":
    sys.exit(main())
