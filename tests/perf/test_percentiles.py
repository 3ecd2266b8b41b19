#!/usr/bin/python3
"""conflux-perf --percentiles and --noise.

  test_percentiles.py CONFLUX_PERF mpi|nompi

  - --percentiles appends p50, p99 and max (us per call) for out of place and in place after the other
    columns: nccl-tests' 13 columns parse as before, p50 <= p99 <= max, the mean is at most the max,
    and -J holds the same numbers (and says percentiles: true);
  - without the flag the rows have 13 columns and -J has no percentile keys;
  - --noise 2 runs its two processes while the ranks run (counted mid-run beside the launcher and the
    two ranks), says so in the header and in -J, and they are gone when conflux-perf returns;
  - with MPI: --compare mpi --percentiles --noise 2 appends the comparison's six after Conflux's six,
    runs the noise beside mpirun's ranks and leaves no process behind either (the launcher waits for
    mpirun, then stops the noise).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nccl_tests_parser as ntp  # noqa: E402

failures = []


def fail(context, message):
    failures.append("%s: %s" % (context, message))


# Every process this script starts, and what they start, inherits this variable: other tests' conflux-perf
# processes (ctest runs tests side by side) are not counted.
MARK = "CFXPERF_TEST_MARK=%d" % os.getpid()


def processes_of(binary):
    """Pids of live processes running `binary` started from this script (zombies excluded)."""
    real = os.path.realpath(binary)
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.path.realpath("/proc/%s/exe" % entry) != real:
                continue
            with open("/proc/%s/environ" % entry, "rb") as f:
                if MARK.encode() not in f.read().split(b"\0"):
                    continue
            with open("/proc/%s/stat" % entry) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            pids.add(int(entry))
    return pids


def run(binary, ctx, args, json_path=None):
    cmd = [binary, "allreduce", "--ranks", "2", "-b", "8", "-e", "4096", "-f", "8", "-w", "5"] + args
    if json_path:
        cmd += ["-J", json_path]
    env = dict(os.environ)
    key, value = MARK.split("=")
    env[key] = value
    # Sample our conflux-perf processes while it runs: the most seen at once says whether the noise ran.
    seen = 0
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, env=env)
        deadline = time.monotonic() + 240
        while p.poll() is None and time.monotonic() < deadline:
            seen = max(seen, len(processes_of(binary)))
            time.sleep(0.02)
        if p.poll() is None:
            p.kill()
            p.wait()
            fail(ctx, "still running after 240 s")
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if p.returncode != 0:
        fail(ctx, "exit status %d: %s" % (p.returncode, stderr[-2000:]))
        return None, stdout, seen
    try:
        return ntp.parse(stdout), stdout, seen
    except ntp.ParseError as e:
        fail(ctx, "does not parse: %s" % e)
        return None, stdout, seen


def check_percentiles(ctx, rep, groups, iters):
    """Each row has 13 + (6 compare columns per comparison) + 6 per group of percentile columns."""
    for row in rep.rows:
        extra = row.extra[6:] if groups == 2 else row.extra
        if len(extra) != 6 * groups:
            fail(ctx, "row %d: %d percentile columns, expected %d: %r" % (row.size, len(extra), 6 * groups, row.line))
            continue
        values = [float(v) for v in extra]
        for g in range(2 * groups):
            p50, p99, mx = values[3 * g: 3 * g + 3]
            if not (0 < p50 <= p99 <= mx):
                fail(ctx, "row %d, group %d: p50 %g, p99 %g, max %g out of order" % (row.size, g, p50, p99, mx))
        for place, g in ((row.out_of_place, 0), (row.in_place, 1)):
            # The mean over iterations cannot exceed the slowest iteration (rounding and the slowest rank
            # of each iteration aside, which only make the max larger).
            if place.time > values[3 * g + 2] * 1.02 + 0.02:
                fail(ctx, "row %d: mean %g us above the max %g us" % (row.size, place.time, values[3 * g + 2]))
    if not any("--percentiles" in c and "%d iterations" % iters in c for c in rep.comments):
        fail(ctx, "the header does not say the iterations are timed one by one")


def check_json(ctx, path, rep):
    with open(path) as f:
        doc = json.load(f)
    if doc["config"].get("percentiles") is not True:
        fail(ctx, "config.percentiles is %r, not true" % doc["config"].get("percentiles"))
    results = doc["results"]
    if len(results) != len(rep.rows):
        fail(ctx, "JSON has %d results for %d rows" % (len(results), len(rep.rows)))
        return
    for res, row in zip(results, rep.rows):
        values = [float(v) for v in row.extra[:6]]
        for key, g in (("out_of_place", 0), ("in_place", 1)):
            place = res[key]
            for i, name in enumerate(("p50", "p99", "max")):
                if name not in place:
                    fail(ctx, "JSON row %d %s has no %s" % (row.size, key, name))
                    continue
                text = float(ntp.format_float(place[name], 7))
                if abs(text - values[3 * g + i]) > 0.011 * max(1.0, text):
                    fail(ctx, "JSON row %d %s %s %g, text %g" % (row.size, key, name, place[name], values[3 * g + i]))


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("mpi", "nompi"):
        print(__doc__)
        return 2
    binary, mpi = sys.argv[1], sys.argv[2] == "mpi"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "p.json")
        rep, _, _ = run(binary, "--percentiles", ["-n", "300", "--percentiles"], path)
        if rep:
            check_percentiles("--percentiles", rep, 1, 300)
            check_json("--percentiles -J", path, rep)

        plain = os.path.join(tmp, "plain.json")
        rep, _, _ = run(binary, "default", ["-n", "20"], plain)
        if rep:
            for row in rep.rows:
                if row.extra:
                    fail("default", "row %d has columns beyond nccl-tests': %r" % (row.size, row.line))
            with open(plain) as f:
                doc = json.load(f)
                if doc["config"].get("percentiles") is not False:
                    fail("default -J", "config.percentiles is %r, not false" % doc["config"].get("percentiles"))
                for res in doc["results"]:
                    if "p50" in res["out_of_place"]:
                        fail("default -J", "percentiles without --percentiles")

        noisy = os.path.join(tmp, "noisy.json")
        rep, _, seen = run(binary, "--noise 2", ["-n", "3000", "--percentiles", "--noise", "2"], noisy)
        if rep:
            check_percentiles("--noise 2", rep, 1, 3000)
            if not any("noisy neighbour: 2 CPU-bound" in c for c in rep.comments):
                fail("--noise 2", "the header does not name the noisy neighbour")
            with open(noisy) as f:
                if json.load(f)["config"].get("noise_processes") != 2:
                    fail("--noise 2 -J", "config.noise_processes is not 2")
        # The launcher, its two ranks and the two noise processes.
        if seen < 5:
            fail("--noise 2", "at most %d conflux-perf processes seen at once during the run, expected 5" % seen)
        left = processes_of(binary)
        if left:
            fail("--noise 2", "processes left running: %s" % sorted(left))

        if mpi:
            rep, _, seen = run(binary, "--compare mpi --noise 2", ["-n", "2000", "--percentiles", "--noise", "2",
                                                                    "--compare", "mpi"])
            if rep:
                check_percentiles("--compare mpi", rep, 2, 2000)
            if seen < 5:
                fail("--compare mpi --noise 2", "at most %d conflux-perf processes seen at once, expected 5" % seen)
            left = processes_of(binary)
            if left:
                fail("--compare mpi --noise 2", "processes left running: %s" % sorted(left))

    for f in failures:
        print("FAIL " + f)
    print("%s: %d failure(s)" % ("OK" if not failures else "FAILED", len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
