#!/usr/bin/python3
"""conflux-perf --compare mpi and --backend mpi, started with --ranks (re-executed under mpirun).

  test_compare_mpi.py CONFLUX_PERF mpi     runs the comparisons and checks them
  test_compare_mpi.py CONFLUX_PERF nompi   checks the clear error, then reports "skipped" (exit 77)

Checks: nccl-tests' 13 columns still parse and pass the same checks as without --compare; the 6 extra
columns (MPI time, MPI busbw, ratio, out of place then in place) are numbers, or N/A where MPI has no
such datatype; ratio = MPI time / Conflux time; MPI's results are right; JSON carries the same values.
"""

import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nccl_tests_parser as ntp  # noqa: E402
import test_output_format as tof  # noqa: E402

SKIP = 77
fail = tof.fail


def run(args):
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=90)
    except subprocess.TimeoutExpired:
        return None


def check_compare(ctx, rep, json_path, mpi_types):
    for row in rep.rows:
        rctx = "%s row %r" % (ctx, row.line)
        if len(row.extra) != 6:
            fail(rctx, "expected 6 comparison columns, got %r" % (row.extra,))
            continue
        for i, place in enumerate(row.places()):
            mt, mbw, ratio = row.extra[3 * i: 3 * i + 3]
            if row.type not in mpi_types:
                if (mt, mbw, ratio) != ("N/A", "N/A", "N/A"):
                    fail(rctx, "MPI columns should be N/A for %s" % row.type)
                continue
            try:
                mt, mbw, ratio = float(mt), float(mbw), float(ratio)
            except ValueError:
                fail(rctx, "MPI columns are not numbers: %r" % (row.extra,))
                continue
            # Both times are printed rounded (to 0.01 us below 100 us, 3 significant digits above), so
            # the ratio of the printed times may differ from the printed ratio by that rounding.
            lo = (mt * 0.995 - 0.005) / (place.time * 1.005 + 0.005)
            hi = (mt * 1.005 + 0.005) / max(place.time * 0.995 - 0.005, 1e-9)
            if row.size > 0 and not (lo - 0.0051 <= ratio <= hi + 0.0051):
                fail(rctx, "ratio %g != MPI time / time = %g" % (ratio, mt / place.time))
    lines = rep.comments
    if not any(l.startswith("# mpi wrong results") and l.split(":")[1].split() == ["0", "OK"] for l in lines):
        fail(ctx, "no '# mpi wrong results ... : 0 OK' line")
    with open(json_path) as f:
        doc = json.load(f)
    if doc.get("backends") != ["conflux", "mpi"] or "compare" not in doc:
        fail(ctx, "JSON backends/compare: %r" % (doc.get("backends"),))
    if doc.get("compare", {}).get("wrong_results") != 0:
        fail(ctx, "JSON compare.wrong_results: %r" % doc.get("compare"))
    for jr, row in zip(doc.get("results", []), rep.rows):
        cmp = jr.get("compare")
        if cmp is None:
            fail(ctx, "JSON row without 'compare': %r" % jr)
            continue
        for i, key in enumerate(("out_of_place", "in_place")):
            mp = cmp[key]
            if row.type not in mpi_types:
                if mp is not None or not cmp.get("skipped"):
                    fail(ctx, "JSON MPI %s should be null with a reason for %s" % (key, row.type))
                continue
            if mp is None or mp["nwrong"] != 0:
                fail(ctx, "JSON MPI %s: %r" % (key, mp))
                continue
            if ntp.format_float(mp["time"], 7).strip() != row.extra[3 * i]:
                fail(ctx, "JSON MPI time %r vs text %r" % (mp["time"], row.extra[3 * i]))


def compare_case(binary, tmp, coll, n, extra, types=("float",), ops=("sum",), mpi_types=None):
    ctx = "%s --ranks %d --compare mpi %s" % (coll, n, " ".join(extra))
    json_path = os.path.join(tmp, "cmp-%s-%d.json" % (coll, n))
    p = run([binary, coll, "--ranks", str(n), "-b", "8", "-e", "4K", "-f", "8", "-n", "5", "-w", "1", "-c", "1",
             "--compare", "mpi", "-J", json_path] + list(extra))
    if p is None or p.returncode != 0:
        fail(ctx, "failed: %s" % ("timeout" if p is None else "exit %d: %s" % (p.returncode, p.stderr.strip())))
        return
    # The nccl-tests columns pass exactly the checks they pass without --compare.
    rep = tof.check_text(ctx, coll, n, p.stdout, [8, 64, 512, 4096], types, ops, (0,), compare=True)
    if rep is None:
        return
    tof.check_json(ctx, json_path, rep, coll, n)
    check_compare(ctx, rep, json_path, mpi_types or types)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, mode = sys.argv[1], sys.argv[2]
    if mode != "mpi":
        p = run([binary, "allreduce", "--ranks", "2", "-b", "8", "-e", "8", "--compare", "mpi"])
        if p is None or p.returncode != 2 or "MPI" not in p.stderr:
            print("FAIL: without MPI, --compare mpi should fail clearly with exit status 2")
            return 1
        print("skipped: conflux-perf was built without MPI (and says so clearly)")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        compare_case(binary, tmp, "allreduce", 2, [])
        all_types = ntp.TYPES
        mpi_types = tuple(t for t in all_types if t not in ("half", "bfloat16"))
        compare_case(binary, tmp, "reducescatter", 3, ["-d", "all", "-o", "avg"], types=all_types, ops=("avg",),
                     mpi_types=mpi_types)
        compare_case(binary, tmp, "alltoall", 3, ["-d", "int32"], types=("int32",))
        compare_case(binary, tmp, "sendrecv", 3, ["-d", "double", "-o", "max"], types=("double",), ops=("max",))
        compare_case(binary, tmp, "allgather", 2, ["-d", "uint8"], types=("uint8",))
        # --backend mpi alone: plain nccl-tests output, every root of reduce.
        ctx = "reduce --ranks 2 --backend mpi -r -1"
        p = run([binary, "reduce", "--ranks", "2", "-b", "8", "-e", "4K", "-f", "8", "-n", "5", "-w", "1",
                 "--backend", "mpi", "-r", "-1", "-o", "min", "-d", "int64"])
        if p is None or p.returncode != 0:
            fail(ctx, "failed: %s" % ("timeout" if p is None else p.stderr.strip()))
        else:
            rep = tof.check_text(ctx, "reduce", 2, p.stdout, [8, 64, 512, 4096], ("int64",), ("min",), (0, 1))
            if rep is not None and any(r.extra for r in rep.rows):
                fail(ctx, "extra columns without --compare")
    for f in tof.failures:
        print("FAIL:", f)
    print("compare mpi: ok" if not tof.failures else "compare mpi: %d failure(s)" % len(tof.failures))
    return 1 if tof.failures else 0


if __name__ == "__main__":
    sys.exit(main())
