#!/usr/bin/python3
"""conflux-perf's output read like nccl-tests output, for every collective.

  test_output_format.py --self-test        the parser on a hand-written sample (no ranks started)
  test_output_format.py CONFLUX_PERF       runs every collective with 2 and 3 forked ranks (-c 1, -J) and
                                           checks columns, types, #wrong == 0, busbw == algbw * factor,
                                           algbw == size / time, the footer, and that the JSON matches.
"""

import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nccl_tests_parser as ntp  # noqa: E402

COLLS = ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv")
NCCL_NAMES = {
    "allreduce": "all_reduce_perf", "allgather": "all_gather_perf", "reducescatter": "reduce_scatter_perf",
    "broadcast": "broadcast_perf", "reduce": "reduce_perf", "alltoall": "alltoall_perf",
    "sendrecv": "sendrecv_perf",
}
ELT = {"int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8, "half": 2, "float": 4,
       "double": 8, "bfloat16": 2}
HAS_OP = ("allreduce", "reducescatter", "reduce", "sendrecv")
HAS_ROOT = ("broadcast", "reduce")

failures = []


def fail(context, message):
    failures.append("%s: %s" % (context, message))


def close(a, b, abs_tol, rel_tol=0.0):
    return abs(a - b) <= abs_tol + rel_tol * max(abs(a), abs(b))


def algbw_fits(algbw, size, time_us):
    """algbw (GB/s, 2 decimals) is size over the unrounded time, which the table rounds (2 decimals below
    10^4 us, 1 below 10^5, then none): anywhere in [size / (time + h), size / (time - h)] for h half the
    time's last digit, give or take algbw's own rounding."""
    h = 0.005 if time_us < 1e4 else 0.05 if time_us < 1e5 else 0.5
    lo = size / (time_us + h) / 1e3
    hi = size / max(time_us - h, 1e-9) / 1e3
    return lo * 0.999 - 0.0051 <= algbw <= hi * 1.001 + 0.0051


def expected_row(coll, size, elt, n):
    """nccl-tests' size and count columns for a loop size."""
    count = size // elt
    if coll in ("allgather", "reducescatter", "alltoall"):
        per_rank = count // n
        return per_rank * n * elt, per_rank
    return count * elt, count


def check_text(ctx, coll, n, out, sizes, types, ops, roots, checked=True, compare=False):
    try:
        rep = ntp.parse(out)
    except (ntp.ParseError, ValueError) as e:
        fail(ctx, "does not parse: %s" % e)
        return None
    lines = out.splitlines()
    if "# Collective test starting: %s" % NCCL_NAMES[coll] not in lines:
        fail(ctx, "no 'Collective test starting' line")
    if "# Collective test concluded: %s" % NCCL_NAMES[coll] not in lines:
        fail(ctx, "no 'Collective test concluded' line")
    if not any(l.startswith("# nThread 1 nGpus 1 minBytes %d maxBytes %d step: " % (sizes[0], sizes[-1]))
               for l in lines):
        fail(ctx, "no nccl-tests '# nThread ...' line")
    rank_lines = [l for l in lines if l.startswith("#  Rank ")]
    if len(rank_lines) != n:
        fail(ctx, "%d '#  Rank' lines for %d ranks" % (len(rank_lines), n))
    l1, l2, l3 = ntp.column_header_lines()
    for want in (l1, l2 + " ", l3 + " "):
        # With --compare the comparison's headers follow nccl-tests' on the same lines.
        if want not in lines and not (compare and any(l.startswith(want.rstrip()) for l in lines)):
            fail(ctx, "column header line missing or reformatted: %r" % want)
    for l in lines:
        if l and not l.startswith("#") and not ntp.ROW_RE.match(l):
            fail(ctx, "row does not match the nccl-tests row pattern: %r" % l)
    expected = [(t, o, r, s) for t in types for o in ops for r in roots for s in sizes]
    if len(rep.rows) != len(expected):
        fail(ctx, "%d rows, expected %d" % (len(rep.rows), len(expected)))
        return rep
    busbws = []
    for row, (t, o, r, s) in zip(rep.rows, expected):
        rctx = "%s row %r" % (ctx, row.line)
        want_size, want_count = expected_row(coll, s, ELT[t], n)
        if (row.size, row.count, row.type) != (want_size, want_count, t):
            fail(rctx, "size/count/type %r, expected %r" % ((row.size, row.count, row.type),
                                                           (want_size, want_count, t)))
        if row.redop != (o if coll in HAS_OP else "none"):
            fail(rctx, "redop %r" % row.redop)
        if row.root != (r if coll in HAS_ROOT else -1):
            fail(rctx, "root %r" % row.root)
        for place in row.places():
            busbws.append(place.busbw)
            if checked and place.wrong != 0:
                fail(rctx, "#wrong is %r" % place.wrong)
            if not checked and place.wrong is not None:
                fail(rctx, "#wrong should be N/A with -c 0")
            factor = ntp.bus_factor(coll, n)
            if not close(place.busbw, place.algbw * factor, 0.0051 + 0.0051 * factor):
                fail(rctx, "busbw %g != algbw %g * %g" % (place.busbw, place.algbw, factor))
            if place.time <= 0 and row.size > 0:
                fail(rctx, "time %g" % place.time)
            elif row.size > 0 and not algbw_fits(place.algbw, row.size, place.time):
                fail(rctx, "algbw %g != size / time = %g" % (place.algbw, row.size / place.time / 1e3))
    mean = sum(busbws) / len(busbws) if busbws else 0.0
    if not close(rep.avg_busbw, mean, 0.0051, 1e-5):
        fail(ctx, "Avg bus bandwidth %g is not the mean of the rows' busbw %g" % (rep.avg_busbw, mean))
    if "# Out of bounds values : 0 OK" not in lines:
        fail(ctx, "no '# Out of bounds values : 0 OK' line")
    if not any(l.startswith("# Avg bus bandwidth    : ") for l in lines):
        fail(ctx, "Avg bus bandwidth line spacing differs from nccl-tests")
    return rep


def check_json(ctx, path, rep, coll, n):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(ctx, "JSON does not load: %s" % e)
        return
    for key, want in (("schema", "conflux-perf/1"), ("collective", coll), ("ranks", n),
                      ("nccl_tests_name", NCCL_NAMES[coll])):
        if doc.get(key) != want:
            fail(ctx, "JSON %s is %r, expected %r" % (key, doc.get(key), want))
    for key in ("machine", "command_line", "args", "backends", "config", "devices", "results", "start_time"):
        if key not in doc:
            fail(ctx, "JSON has no %r" % key)
    if len(doc.get("devices", [])) != n:
        fail(ctx, "JSON devices: %d, expected %d" % (len(doc.get("devices", [])), n))
    for key in ("hostname", "cpu_model", "cores"):
        if key not in doc.get("machine", {}):
            fail(ctx, "JSON machine has no %r" % key)
    results = doc.get("results", [])
    if len(results) != len(rep.rows):
        fail(ctx, "JSON has %d results, text %d rows" % (len(results), len(rep.rows)))
        return
    for jr, row in zip(results, rep.rows):
        rctx = "%s JSON row %r" % (ctx, row.line)
        if (jr["size"], jr["count"], jr["type"], jr["redop"], jr["root"]) != (
                row.size, row.count, row.type, row.redop, row.root):
            fail(rctx, "fields differ: %r" % jr)
        text_fields = row.line.split()
        for i, key in enumerate(("out_of_place", "in_place")):
            jp = jr[key]
            tf = text_fields[5 + 4 * i: 9 + 4 * i]
            got = [ntp.format_float(jp["time"], 7).strip(), ntp.format_float(jp["alg_bw"], 6).strip(),
                   ntp.format_float(jp["bus_bw"], 6).strip(), "N/A" if jp["nwrong"] is None else "%g" % jp["nwrong"]]
            if got != tf:
                fail(rctx, "%s: JSON %r vs text %r" % (key, got, tf))
    if "%g" % doc.get("average_bus_bandwidth", -1) != "%g" % rep.avg_busbw:
        fail(ctx, "JSON average_bus_bandwidth %r vs text %r" % (doc.get("average_bus_bandwidth"), rep.avg_busbw))
    if doc.get("out_of_bounds") != {"count": 0, "okay": True}:
        fail(ctx, "JSON out_of_bounds %r" % doc.get("out_of_bounds"))


def run_case(binary, tmp, coll, n, extra=(), types=("float",), ops=("sum",), roots=(0,), checked=True):
    sizes = [8, 64, 512, 4096]
    ctx = "%s --ranks %d %s" % (coll, n, " ".join(extra))
    json_path = os.path.join(tmp, "%s-%d-%d.json" % (coll, n, len(failures) + len(extra)))
    args = [binary, coll, "--ranks", str(n), "-b", "8", "-e", "4K", "-f", "8", "-n", "5", "-w", "1",
            "-J", json_path] + list(extra)
    if checked:
        args += ["-c", "1"]
    try:
        p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        fail(ctx, "timed out")
        return
    if p.returncode != 0:
        fail(ctx, "exit status %d, stderr: %s" % (p.returncode, p.stderr.strip()))
        return
    rep = check_text(ctx, coll, n, p.stdout, sizes, types, ops, roots, checked)
    if rep is not None:
        check_json(ctx, json_path, rep, coll, n)


SAMPLE = """\
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 128(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
#  Rank  0 Group  0 Pid   4242 on      node1 device  0 [cpu core 0] host memory, Example CPU
           8             2     float     sum      -1     1.50    0.01    0.01       0     1.25    0.01    0.01       0
        1024           256     float     sum      -1    12.34    0.08    0.08       0  12345.6    0.00    0.00    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.025 
#
"""


def self_test():
    rep = ntp.parse(SAMPLE)
    assert len(rep.rows) == 2
    r = rep.rows[1]
    assert (r.size, r.count, r.type, r.redop, r.root) == (1024, 256, "float", "sum", -1)
    assert r.in_place.wrong is None and r.out_of_place.wrong == 0
    assert r.in_place.time == 12345.6
    assert rep.out_of_bounds == (0, "OK") and rep.avg_busbw == 0.025
    assert ntp.format_float(1.234, 7) == "   1.23"
    assert ntp.format_float(12345.67, 7) == "12345.7"
    assert ntp.format_float(1234567.8, 7) == "1234568"
    assert ntp.format_float(123456789.0, 7) == "1.2e+08"
    assert ntp.format_float(999.999, 6) == "1000.0"
    assert abs(ntp.bus_factor("allreduce", 4) - 1.5) < 1e-12
    assert abs(ntp.bus_factor("alltoall", 4) - 0.75) < 1e-12
    assert ntp.bus_factor("broadcast", 4) == 1.0
    try:
        ntp.parse(SAMPLE.replace("       0     1.25", "     1.25"))
        raise AssertionError("a short row must not parse")
    except ntp.ParseError:
        pass
    print("parser self-test: ok")
    return 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        for n in (2, 3):
            for coll in COLLS:
                run_case(binary, tmp, coll, n)
        # Every type and op, -c 0 (N/A), every root, and sendrecv's op column.
        all_types = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16")
        run_case(binary, tmp, "allreduce", 2, ["-d", "all", "-o", "all"], types=all_types, ops=ntp.OPS)
        run_case(binary, tmp, "reducescatter", 3, ["-d", "all", "-o", "all"], types=all_types, ops=ntp.OPS)
        run_case(binary, tmp, "alltoall", 3, ["-d", "all"], types=all_types)
        run_case(binary, tmp, "reduce", 3, ["-r", "-1", "-o", "max"], ops=("max",), roots=(0, 1, 2))
        run_case(binary, tmp, "broadcast", 3, ["-r", "-1"], roots=(0, 1, 2))
        run_case(binary, tmp, "sendrecv", 2, ["-o", "prod", "-d", "int64"], types=("int64",), ops=("prod",))
        run_case(binary, tmp, "allgather", 2, ["-c", "0"], checked=False)
    for f in failures:
        print("FAIL:", f)
    print("%s" % ("output format: ok" if not failures else "output format: %d failure(s)" % len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
