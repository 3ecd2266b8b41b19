#!/usr/bin/python3
"""conflux-perf --memory cuda and the nccl backend, as far as a machine without a GPU can check them.

  test_cuda_memory.py CONFLUX_PERF cuda     a build with CUDA (CONFLUX_HAVE_CUDA)
  test_cuda_memory.py CONFLUX_PERF nocuda   a build without

Both: --backend/--compare nccl without --memory cuda, NCCL compared with itself and a bad --memory value
are bad flags (one line on stderr, exit 2). Without CUDA: --memory cuda is a bad flag naming the build.
With CUDA: -R 1, --backend mpi and --compare mpi with --memory cuda are bad flags; a CONFLUX_PERF_NCCL_LIB
that does not exist or is not NCCL fails (exit 1) with a message naming the path and the loader's error,
before any rank starts; a run with --memory cuda either reports "skipped: no CUDA device" with exit 77 and
prints nothing on stdout (never numbers) and leaves no -J file, or, where a GPU exists, runs and checks right. On a GPU machine
with CONFLUX_PERF_NCCL_LIB set, --backend nccl and --compare nccl run and check right too.
"""

import json
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nccl_tests_parser as ntp  # noqa: E402

SKIPPED = 77
failures = []


def fail(context, message):
    failures.append("%s: %s" % (context, message))


def run(binary, args, env=None):
    full = dict(os.environ)
    full.pop("CONFLUX_PERF_NCCL_LIB", None)
    full.update(env or {})
    try:
        return subprocess.run([binary] + args, capture_output=True, text=True, timeout=120, env=full)
    except subprocess.TimeoutExpired:
        return None


def expect_error(binary, args, status, words, env=None):
    ctx = " ".join(args)
    p = run(binary, args, env)
    if p is None:
        fail(ctx, "timed out")
        return
    if p.returncode != status:
        fail(ctx, "exit status %d, expected %d (stderr %r)" % (p.returncode, status, p.stderr.strip()))
    for w in words:
        if w not in p.stderr:
            fail(ctx, "stderr %r should say %r" % (p.stderr.strip(), w))
    if not p.stderr.startswith("conflux-perf: "):
        fail(ctx, "stderr should start with 'conflux-perf: ': %r" % p.stderr[:200])
    if p.stdout.strip():
        fail(ctx, "printed to stdout: %r" % p.stdout[:200])


def check_run(binary, args, env=None, compare=None):
    """A --memory cuda run: skipped without a device, or right with one. Returns True when it ran."""
    ctx = " ".join(args)
    p = run(binary, args, env)
    if p is None:
        fail(ctx, "timed out")
        return False
    if p.returncode == SKIPPED:
        if "skipped: no CUDA device" not in p.stderr:
            fail(ctx, "exit 77 without 'skipped: no CUDA device' on stderr: %r" % p.stderr.strip())
        if p.stdout.strip():
            fail(ctx, "a skipped run printed to stdout: %r" % p.stdout[:300])
        return False
    if p.returncode != 0:
        fail(ctx, "exit status %d (stderr %r)" % (p.returncode, p.stderr.strip()[-2000:]))
        return False
    try:
        rep = ntp.parse(p.stdout)
    except (ntp.ParseError, ValueError) as e:
        fail(ctx, "does not parse: %s" % e)
        return True
    if not rep.rows:
        fail(ctx, "no rows")
    if rep.out_of_bounds != (0, "OK"):
        fail(ctx, "out of bounds: %r" % (rep.out_of_bounds,))
    if not any("CUDA device buffers" in c for c in rep.comments):
        fail(ctx, "the header does not say CUDA device buffers")
    for row in rep.rows:
        for place in row.places():
            if place.wrong != 0:
                fail(ctx, "wrong elements in %r" % row.line)
        if compare and len(row.extra) != 6:
            fail(ctx, "expected 6 %s columns in %r" % (compare, row.line))
    if compare and ("# %-24s : 0 OK" % (compare + " wrong results")) not in p.stdout.splitlines():
        fail(ctx, "no '%s wrong results : 0 OK' line" % compare)
    return True


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("cuda", "nocuda"):
        print(__doc__)
        return 2
    binary, build = sys.argv[1], sys.argv[2]
    nccl_lib = os.environ.get("CONFLUX_PERF_NCCL_LIB")
    small = ["-b", "8", "-e", "64K", "-f", "16"]

    expect_error(binary, ["allreduce", "--backend", "nccl"], 2, ["--backend nccl needs --memory cuda"])
    expect_error(binary, ["allreduce", "--compare", "nccl"], 2, ["--compare nccl needs --memory cuda"])
    expect_error(binary, ["allreduce", "--backend", "nccl", "--compare", "nccl"], 2, ["compares NCCL with itself"])
    expect_error(binary, ["allreduce", "--memory", "gpu"], 2, ["--memory", "host or cuda"])

    if build == "nocuda":
        for extra in ([], ["--backend", "nccl"], ["--compare", "nccl"]):
            expect_error(binary, ["allreduce", "--memory", "cuda"] + extra, 2,
                         ["--memory cuda needs a build with CUDA"])
    else:
        expect_error(binary, ["allreduce", "--memory", "cuda", "-R", "1"], 2, ["-R 1", "--memory cuda"])
        expect_error(binary, ["allreduce", "--memory", "cuda", "--backend", "mpi"], 2, ["--backend mpi runs on host"])
        expect_error(binary, ["allreduce", "--memory", "cuda", "--compare", "mpi"], 2, ["--compare mpi runs on host"])
        with tempfile.TemporaryDirectory() as tmp:
            missing = os.path.join(tmp, "no-such-dir", "libnccl.so.2")
            for extra in (["--backend", "nccl"], ["--compare", "nccl"]):
                expect_error(binary, ["allreduce", "--ranks", "2", "--memory", "cuda"] + extra, 1,
                             ["cannot load NCCL from '%s'" % missing, "No such file", "CONFLUX_PERF_NCCL_LIB"],
                             env={"CONFLUX_PERF_NCCL_LIB": missing})
        # A library that loads but is not NCCL: the first missing function is named.
        expect_error(binary, ["allreduce", "--ranks", "2", "--memory", "cuda", "--backend", "nccl"], 1,
                     ["'libc.so.6' has no ncclGetUniqueId"], env={"CONFLUX_PERF_NCCL_LIB": "libc.so.6"})
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "run.json")
            ran = check_run(binary, ["allreduce", "--ranks", "2", "--memory", "cuda", "-J", path] + small)
            if not ran and os.path.exists(path):
                fail("-J with --memory cuda", "a skipped run left %s behind" % path)
            if ran:
                with open(path) as f:
                    doc = json.load(f)
                if doc["config"].get("memory") != "cuda" or doc["devices"][0].get("memory") != "cuda":
                    fail("-J with --memory cuda", "memory is not cuda in the JSON: %r" % doc["config"])
        check_run(binary, ["allreduce", "--memory", "cuda", "-b", "8", "-e", "8"])  # one rank, no --ranks
        if ran:
            for coll in ("allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv"):
                check_run(binary, [coll, "--ranks", "2", "--memory", "cuda"] + small)
        if ran and nccl_lib:
            env = {"CONFLUX_PERF_NCCL_LIB": nccl_lib}
            check_run(binary, ["allreduce", "--ranks", "2", "--memory", "cuda", "--backend", "nccl", "-d", "all",
                               "-o", "all"] + small, env)
            for coll in ("allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "sendrecv"):
                check_run(binary, [coll, "--ranks", "2", "--memory", "cuda", "--compare", "nccl"] + small, env,
                          compare="nccl")
    for f in failures:
        print("FAIL:", f)
    print("--memory cuda and nccl: ok" if not failures else "--memory cuda and nccl: %d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
