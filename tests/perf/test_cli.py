#!/usr/bin/python3
"""conflux-perf's command line: bad flags give one clear message on stderr, no rows, and exit status 2;
-h prints the usage and exits 0; an invalid root for the actual number of ranks fails with status 1;
NCCL_TESTS_MIN_BW turns a low average bus bandwidth into FAILED, as in nccl-tests; --buffer_offset runs
correct calls on buffers that start inside a page; `conflux-perf cores`
prints its two measurements, and refuses bad flags and cores that do not exist.

  test_cli.py CONFLUX_PERF
"""

import os
import subprocess
import sys

# (arguments, words the error message must contain)
BAD = [
    ([], "missing the collective"),
    (["allreduc"], "unknown collective 'allreduc'"),
    (["allreduce", "-x"], "unknown flag '-x'"),
    (["allreduce", "--no-such-flag"], "unknown flag '--no-such-flag'"),
    (["allreduce", "-n"], "missing value after -n"),
    (["allreduce", "-b", "12Q"], "-b (--minbytes)"),
    (["allreduce", "-e", "-5"], "-e (--maxbytes)"),
    (["allreduce", "-b", "1M", "-e", "1K"], "larger than -e"),
    (["allreduce", "-n", "0"], "-n (--iters)"),
    (["allreduce", "-w", "x"], "-w (--warmup_iters)"),
    (["allreduce", "-f", "1", "-i", "0", "-b", "8", "-e", "64"], "never reach"),
    (["allreduce", "-d", "float128"], "-d (--datatype)"),
    (["allreduce", "-o", "mulsum"], "mulsum"),
    (["allreduce", "-a", "4"], "-a (--average)"),
    (["allreduce", "-r", "-2"], "-r (--root)"),
    (["allreduce", "-z", "2"], "-z (--blocking)"),
    (["allreduce", "-R", "2"], "-R (--local_register)"),
    (["allreduce", "-t", "2"], "-t (--nthreads)"),
    (["allreduce", "-g", "8"], "-g (--ngpus)"),
    (["allreduce", "-G", "1"], "-G (--cudagraph)"),
    (["allreduce", "--ranks", "0"], "--ranks"),
    (["allreduce", "--backend", "nccl"], "--backend nccl needs --memory cuda"),
    (["allreduce", "--backend", "gloo"], "--backend"),
    (["allreduce", "--compare", "gloo"], "--compare"),
    (["allreduce", "--backend", "mpi", "--compare", "mpi"], "compares MPI with itself"),
    (["allreduce", "stray"], "unexpected argument 'stray'"),
    (["allreduce", "--noise", "-1"], "--noise"),
    (["allreduce", "--noise", "257"], "--noise"),
    (["allreduce", "--noise", "two"], "--noise"),
    (["allreduce", "--noise", "1"], "--noise starts its processes beside the ranks of --ranks"),
    (["allreduce", "--buffer_offset", "-1"], "--buffer_offset"),
    (["allreduce", "--buffer_offset", "4096"], "--buffer_offset"),
    (["allreduce", "--buffer_offset", "12"], "a multiple of 8"),
    (["allreduce", "--buffer_offset", "x"], "--buffer_offset"),
]


CORES_BAD = [
    (["--cores", "0"], "two different core numbers"),
    (["--cores", "1,1"], "two different core numbers"),
    (["--cores", "0,x"], "two different core numbers"),
    (["--samples", "0"], "--samples takes 1..1000"),
    (["--samples"], "missing the value of --samples"),
    (["--what", "1"], "unknown flag --what"),
    (["--cores", "0,100000"], "two different core numbers"),
    (["--cores", "0,%d" % (os.cpu_count() or 1)], "online cores"),
]


def check_cores(binary):
    """conflux-perf cores: the measurement's two lines (each a positive median), and its bad flags."""
    failures = []
    for args, words in CORES_BAD:
        p = subprocess.run([binary, "cores"] + args, capture_output=True, text=True, timeout=30)
        if p.returncode != 2 or words not in p.stderr or not p.stderr.startswith("conflux-perf cores: "):
            failures.append("cores %r: exit %d, stderr %r should say %r" % (args, p.returncode, p.stderr.strip(), words))
    p = subprocess.run([binary, "cores", "--samples", "3"], capture_output=True, text=True, timeout=60)
    if (os.cpu_count() or 1) < 2:
        if p.returncode != 2:
            failures.append("cores on one core: exit %d, expected 2" % p.returncode)
        return failures
    lines = {l.split(":")[0]: l for l in p.stdout.splitlines()}
    for key, unit in (("# round trip of a cache line", " ns,"), ("# 1 MiB written on one core, copied on the other", " us,")):
        line = lines.get(key, "")
        value = line.split(": ", 1)[1].split(unit)[0] if unit in line else ""
        if p.returncode != 0 or not value or float(value) <= 0 or "median of 3" not in line:
            failures.append("cores: exit %d, no %r line with a positive median of 3 in %r" % (p.returncode, key, p.stdout))
    return failures


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    binary = sys.argv[1]
    failures = []
    for args, words in BAD:
        p = subprocess.run([binary] + args, capture_output=True, text=True, timeout=30)
        if p.returncode != 2:
            failures.append("%r: exit status %d, expected 2" % (args, p.returncode))
        if words not in p.stderr or not p.stderr.startswith("conflux-perf: "):
            failures.append("%r: stderr %r should say %r" % (args, p.stderr.strip(), words))
        if p.stdout.strip():
            failures.append("%r: printed to stdout: %r" % (args, p.stdout[:200]))
    for args in (["-h"], ["--help"], ["allreduce", "-h"]):
        p = subprocess.run([binary] + args, capture_output=True, text=True, timeout=30)
        if p.returncode != 0 or "usage: conflux-perf" not in p.stdout or "--compare" not in p.stdout:
            failures.append("%r: expected the usage text and exit status 0" % (args,))
    # A root that only turns out invalid once the ranks exist.
    p = subprocess.run([binary, "broadcast", "--ranks", "2", "-r", "2", "-b", "8", "-e", "8"],
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 1 or "root must be below the number of ranks (2)" not in p.stderr:
        failures.append("broadcast -r 2 with 2 ranks: exit %d, stderr %r" % (p.returncode, p.stderr.strip()))
    # nccl-tests' NCCL_TESTS_MIN_BW: the Avg bus bandwidth line says OK or FAILED, and so does the exit status.
    for min_bw, status, verdict in (("0", 0, " OK"), ("1e9", 1, " FAILED")):
        env = dict(os.environ, NCCL_TESTS_MIN_BW=min_bw)
        p = subprocess.run([binary, "allreduce", "--ranks", "1", "-b", "8", "-e", "8"], capture_output=True,
                           text=True, timeout=60, env=env)
        avg = [l for l in p.stdout.splitlines() if l.startswith("# Avg bus bandwidth    : ")]
        if p.returncode != status or len(avg) != 1 or not avg[0].endswith(verdict):
            failures.append("NCCL_TESTS_MIN_BW=%s: exit %d, %r" % (min_bw, p.returncode, avg))
    # --buffer_offset: buffers 16 bytes into a page (as malloc's), results still checked, and said so.
    p = subprocess.run([binary, "allgather", "--ranks", "2", "-b", "8K", "-e", "256K", "-f", "32", "-n", "3",
                        "--buffer_offset", "16"], capture_output=True, text=True, timeout=120)
    rows = [l.split() for l in p.stdout.splitlines() if l.strip() and not l.startswith("#")]
    if (p.returncode != 0 or "host buffers starting 16 bytes into a page" not in p.stdout or len(rows) != 2
            or any(r[8] != "0" or r[12] != "0" for r in rows)):
        failures.append("--buffer_offset 16: exit %d, rows %r, stderr %r" % (p.returncode, rows, p.stderr[-500:]))
    failures += check_cores(binary)
    for f in failures:
        print("FAIL:", f)
    print("command line: ok" if not failures else "command line: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
