"""dist.all_reduce of float32 CPU tensors through the conflux backend and through gloo, side by side in one
run, with the same call through torch's do-nothing "fake" backend (what torch itself costs per call) and
through conflux-perf (the library without torch) beside them, so that what the backend adds is visible.

    .venv/bin/python perf/torch_bench.py --ranks 2 4 -b 8 -e 256M -f 4 --reps 5 \\
        --perf build/ci/perf/conflux-perf/conflux-perf --json torch_bench.json --plot torch_bench.png

Method: for each repetition and rank count, one torch job (every rank pinned to core rank % cores; per size a
warm-up, then one timed batch per backend, in turn conflux, gloo, fake, each batch after a barrier of its
own group) and then one conflux-perf run (--pin) with the same sizes, so slow spells of a noisy machine
spread over every column; the table shows medians over the repetitions. busbw = 2 (n-1)/n x bytes / time.
added_us = conflux - conflux-perf (all that torch and the backend add); no-FR = the conflux column again in a job with
TORCH_FR_BUFFER_SIZE=0 (torch then attaches no flight-recorder hook to plugin groups, which it does by
default, at about 2 us a call); backend_us = no-FR - fake - conflux-perf (what the backend itself adds:
the fake column is torch's own cost of a call).
A benchmark, not a test: the targets are reported, never asserted.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from plot import size_label  # noqa: E402

BATCH_SECONDS = 0.05  # each timed batch runs about this long (at least one call)


def parse_size(s):
    s = s.strip().upper()
    for suffix, mult in (("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)):
        if s.endswith(suffix):
            return int(s[:-1]) * mult
    return int(s)


def sizes_from(b, e, f):
    out, x = [], b
    while x <= e:
        out.append(x)
        x *= f
    return out


# ---- one torch job: every rank runs this ----

def torch_job(rank, world, sizes, path, results, only_conflux):
    if only_conflux:  # the conflux column again without torch's flight-recorder hook on plugin groups
        os.environ["TORCH_FR_BUFFER_SIZE"] = "0"
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed import fake_pg  # noqa: F401  (registers the "fake" backend)

    os.sched_setaffinity(0, {rank % os.cpu_count()})
    torch.set_num_threads(1)
    dist.init_process_group("conflux", init_method="file://" + path, rank=rank, world_size=world)
    groups = {"conflux": dist.group.WORLD}
    if not only_conflux:
        groups.update({"gloo": dist.new_group(backend="gloo"), "fake": dist.new_group(backend="fake")})
    times = {}
    for b in sizes:
        n = max(1, b // 4)
        t = torch.ones(n, dtype=torch.float32)
        per = {}
        for name, g in groups.items():
            dist.all_reduce(t, group=g)  # warm-up: plans, buffers, pages
            # Calls per batch, agreed by every rank (rank 0's estimate, broadcast on the group itself).
            t0 = time.perf_counter()
            dist.all_reduce(t, group=g)
            est = torch.tensor([max(1, min(20000, int(BATCH_SECONDS / max(time.perf_counter() - t0, 1e-7))))])
            dist.broadcast(est, src=0, group=g if name != "fake" else groups["conflux"])
            per[name] = int(est.item())
        for name, g in groups.items():
            iters = per[name]
            dist.barrier(group=g if name != "fake" else groups["conflux"])
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(t, group=g)
            times.setdefault(name, {})[b] = (time.perf_counter() - t0) / iters * 1e6
    if rank == 0:
        results.put(times)
    dist.barrier()
    dist.destroy_process_group()


def run_torch(world, sizes, only_conflux=False):
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "rendezvous")
        procs = [ctx.Process(target=torch_job, args=(r, world, sizes, path, results, only_conflux))
                 for r in range(world)]
        for p in procs:
            p.start()
        times = results.get(timeout=1800)
        for p in procs:
            p.join(timeout=60)
            if p.exitcode != 0:
                raise RuntimeError(f"a torch rank exited with {p.exitcode}")
    return times


def run_perf(perf, world, b, e, f):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "perf.json")
        cmd = [perf, "allreduce", "--ranks", str(world), "--pin", "-b", str(b), "-e", str(e), "-f", str(f),
               "-d", "float", "-J", out]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as fh:
            data = json.load(fh)
    times = {}
    for row in data["results"]:  # torch's all_reduce is in place: compare with conflux-perf's in-place time
        times[int(row["size"])] = float(row["in_place"]["time"])
    return times


def busbw(bytes_, us, n):
    return 2 * (n - 1) / n * bytes_ / (us * 1e-6) / 1e9 if us > 0 else 0.0


def plot(report, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [int(b) for b in report["sizes"]]
    worlds = list(report["ranks"].keys())
    fig, axes = plt.subplots(1, len(worlds), figsize=(6 * len(worlds), 4), squeeze=False)
    for ax, world in zip(axes[0], worlds):
        med = report["ranks"][world]["median_us"]
        n = int(world)
        for k, style in (("conflux", "o-"), ("gloo", "s-"), ("perf", "^--")):
            if k in med:
                label = {"perf": "conflux-perf (no torch)", "conflux": "torch + conflux", "gloo": "torch + gloo"}[k]
                ax.plot(sizes, [busbw(b, med[k][str(b)] if str(b) in med[k] else med[k][b], n) for b in sizes], style,
                        label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("bytes")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_title(f"dist.all_reduce float32 on CPU, {n} processes")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    p.add_argument("-b", default="8")
    p.add_argument("-e", default="256M")
    p.add_argument("-f", type=int, default=4)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--perf", help="conflux-perf executable (its column is left out without it)")
    p.add_argument("--json", help="write the medians (and every repetition) here")
    p.add_argument("--plot", help="draw busbw by size into this PNG (needs matplotlib)")
    p.add_argument("--replot", help="no runs: draw --plot from this --json file (e.g. with /usr/bin/python3)")
    args = p.parse_args()
    if args.replot:
        with open(args.replot) as fh:
            report = json.load(fh)
        plot(report, args.plot)
        return 0
    sizes = sizes_from(parse_size(args.b), parse_size(args.e), args.f)
    report = {"sizes": sizes, "ranks": {}}
    for world in args.ranks:
        reps = {"conflux": [], "gloo": [], "fake": [], "nofr": [], "perf": []}
        for _ in range(args.reps):
            t = run_torch(world, sizes)
            for k in ("conflux", "gloo", "fake"):
                if k in t:
                    reps[k].append(t[k])
            reps["nofr"].append(run_torch(world, sizes, only_conflux=True)["conflux"])
            if args.perf:
                reps["perf"].append(run_perf(args.perf, world, sizes[0], sizes[-1], args.f))
        med = {k: {b: statistics.median(r[b] for r in v) for b in sizes} for k, v in reps.items() if v}
        report["ranks"][world] = {"median_us": med, "reps": reps}
        print(f"\n# {world} processes, float32 all_reduce on CPU tensors, medians of {args.reps} (us; busbw GB/s)")
        head = f"{'size':>6} {'conflux':>10} {'busbw':>7} {'gloo':>10} {'busbw':>7} {'x gloo':>7}"
        if "fake" in med:
            head += f" {'fake':>8} {'no-FR':>8}"
        if "perf" in med:
            head += f" {'cfx-perf':>9} {'added':>8} {'backend':>8} {'x perf':>7}"
        print(head)
        for b in sizes:
            c, g = med["conflux"][b], med["gloo"][b]
            line = f"{size_label(b):>6} {c:10.2f} {busbw(b, c, world):7.3f} {g:10.2f} {busbw(b, g, world):7.3f} {g / c:7.2f}"
            if "fake" in med:
                line += f" {med['fake'][b]:8.2f} {med['nofr'][b]:8.2f}"
            if "perf" in med:
                pt = med["perf"][b]
                backend = med["nofr"][b] - med["fake"][b] - pt if "fake" in med else float("nan")
                line += f" {pt:9.2f} {c - pt:8.2f} {backend:8.2f} {c / pt:7.2f}"
            print(line)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1)
    if args.plot:
        try:
            plot(report, args.plot)
        except ImportError:
            print(f"no matplotlib here: draw it with /usr/bin/python3 {sys.argv[0]} --replot {args.json} --plot {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
