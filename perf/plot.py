#!/usr/bin/python3
"""Plot bus bandwidth against message size from `conflux-perf -J` JSON files.

    /usr/bin/python3 perf/plot.py run1.json [run2.json ...] -o busbw.png [--inplace] [--title T]
    /usr/bin/python3 perf/plot.py --selftest

One solid line per run (conflux), plus a dashed line of the same colour for the MPI baseline when the run
was made with `--compare mpi`. The x axis is log2 with B/KiB/MiB/GiB labels; the title names the machine
and the command (several commands are listed below the plot).

Input (lenient, so that schema changes do not break it): a JSON object per run, either conflux-perf's
own layout ("schema": "conflux-perf/1")
  "machine": {"hostname", "cpu_model", "cores"}, "command_line", "collective", "ranks",
  "backends": ["conflux", "mpi"], "results": [{"size", "type", "redop",
      "out_of_place": {"time", "alg_bw", "bus_bw"}, "in_place": {...},
      "compare": {"out_of_place": {...}, "in_place": {...}}}, ...]
or a flat one
  "machine": {"cpu", "cores"}, "command", "backend",
  "rows": [{"size", "busbw_oop", "busbw_ip", "mpi_busbw_oop", "time_oop", ...}, ...].
Also accepted: a list of runs; "rows"/"results"/"data"; "bytes" for "size"; "busbw" for "busbw_oop";
"mpi_busbw" for "mpi_busbw_oop". A run that sweeps several datatypes or ops gets one line per (type, op).

Needs matplotlib (Debian: python3-matplotlib with /usr/bin/python3). Exit codes: 0 ok, 1 bad input,
77 matplotlib missing (ctest treats 77 as skipped).
"""

import argparse
import json
import math
import os
import sys
import tempfile

SKIP = 77


def load_matplotlib():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        return None


# ---------------------------------------------------------------------------------------------------------
# Reading runs.

def _number(v):
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _first(d, keys):
    for k in keys:
        if k in d:
            v = _number(d[k])
            if v is not None:
                return v
    return None


PLACE_KEYS = {False: ("out_of_place", "oop"), True: ("in_place", "ip")}
BASELINE_NESTS = ("compare", "mpi", "baseline")


def _place(d, inplace, metric_keys):
    """A metric from a nested place object: d["out_of_place"]["bus_bw"] and the like."""
    for key in PLACE_KEYS[inplace]:
        sub = d.get(key)
        if isinstance(sub, dict):
            v = _first(sub, metric_keys)
            if v is not None:
                return v
    return None


def _row_metric(row, inplace, baseline, flat, nested):
    """flat: key stems such as "busbw" (tried as stem_oop/stem_ip, then stem); nested: keys inside a
    place object ("bus_bw"). baseline: the comparison's value instead of the benchmarked backend's."""
    kind = PLACE_KEYS[inplace][1]
    if not baseline:
        keys = [f"{f}_{kind}" for f in flat] + ([] if inplace else list(flat))
        v = _first(row, keys)
        return v if v is not None else _place(row, inplace, nested)
    for prefix in ("mpi_", "baseline_", "nccl_"):
        keys = [f"{prefix}{f}_{kind}" for f in flat] + ([] if inplace else [prefix + f for f in flat])
        v = _first(row, keys)
        if v is not None:
            return v
    for nest in BASELINE_NESTS:
        sub = row.get(nest)
        if isinstance(sub, dict):
            v = _row_metric(sub, inplace, False, flat, nested)
            if v is not None:
                return v
    return None


def row_value(row, inplace, baseline):
    """busbw (GB/s) of one row: conflux's, or the baseline's (MPI) when baseline is True; None if absent."""
    return _row_metric(row, inplace, baseline, ("busbw", "bus_bw"), ("bus_bw", "busbw"))


def row_time(row, inplace, baseline):
    """Time per call (µs) of one row, like row_value."""
    return _row_metric(row, inplace, baseline, ("time",), ("time", "time_us"))


def row_percentile(row, inplace, baseline, which):
    """p50, p99 or max (µs per call, conflux-perf --percentiles) of one row, like row_value."""
    return _row_metric(row, inplace, baseline, (which,), (which,))


def row_group(row):
    """(type, op) of a row, for runs that sweep several datatypes or ops (-d all, -o all)."""
    return tuple(str(row[k]) for k in ("type", "redop") if row.get(k) not in (None, "", "none"))


def row_size(row):
    return _first(row, ["size", "bytes", "size_bytes", "msg_size"])


def runs_from(doc, path):
    """Yields run dicts from a parsed JSON document."""
    if isinstance(doc, list):
        for d in doc:
            yield from runs_from(d, path)
        return
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a JSON object or a list of objects")
    if "runs" in doc and isinstance(doc["runs"], list) and "rows" not in doc:
        for d in doc["runs"]:
            if isinstance(d, dict):
                merged = {k: v for k, v in doc.items() if k != "runs"}
                merged.update(d)
                yield merged
        return
    yield doc


def rows_of(run):
    for key in ("rows", "results", "data"):
        if isinstance(run.get(key), list):
            return [r for r in run[key] if isinstance(r, dict)]
    return []


def describe_backend(run):
    if run.get("backend"):
        return str(run["backend"])
    b = run.get("backends")
    if isinstance(b, list) and b:
        return str(b[0])
    return "conflux"


def describe_baseline(run):
    comp = run.get("compare") or run.get("baseline")
    if isinstance(comp, str) and comp:
        return comp
    if isinstance(comp, dict):
        for k in ("backend", "name"):
            if comp.get(k):
                return str(comp[k])
    b = run.get("backends")
    if isinstance(b, list) and len(b) > 1:
        return str(b[1])
    return "mpi"


def run_label(run, path, backend=None):
    if run.get("label"):
        return str(run["label"]) + (f" ({backend})" if backend else "")
    parts = [backend or describe_backend(run)]
    if run.get("collective"):
        parts.append(str(run["collective"]))
    if run.get("ranks") is not None:
        parts.append(f"{run['ranks']} ranks")
    label = " ".join(parts)
    return label if len(parts) > 1 else f"{label} ({os.path.basename(path)})"


def machine_text(m):
    if not isinstance(m, dict):
        return str(m) if m else ""
    bits = []
    cpu = m.get("cpu") or m.get("cpu_model")
    if cpu:
        bits.append(str(cpu))
    if m.get("cores"):
        bits.append(f"{m['cores']} cores")
    if m.get("hostname"):
        bits.append(str(m["hostname"]))
    return ", ".join(bits)


def run_command(run):
    for k in ("command", "command_line"):
        if run.get(k):
            return command_text(run[k])
    return command_text(run.get("args"))


def command_text(c):
    """The command as text, with absolute paths cut to their last component (plots are published)."""
    words = [str(x) for x in c] if isinstance(c, list) else (str(c).split() if c else [])
    return " ".join(os.path.basename(w) if w.startswith("/") else w for w in words)


# ---------------------------------------------------------------------------------------------------------
# Drawing.

def size_label(b):
    b = int(b)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if b < 1024 or b % 1024 != 0:
            return f"{b}{unit}"
        b //= 1024
    return f"{b}PiB"


def plot(plt, inputs, out, inplace=False, title=None):
    """inputs: list of (path, run). Returns the number of lines drawn."""
    fig, ax = plt.subplots(figsize=(10, 6), dpi=110)
    colors = plt.rcParams["axes.prop_cycle"].by_key().get("color", ["C0", "C1", "C2", "C3"])
    sizes_seen = set()
    lines = 0
    machines, commands = [], []
    series = []  # (path, run, rows, suffix): one per run, or per (type, op) when a run sweeps several
    for path, run in inputs:
        rows = rows_of(run)
        groups = []
        for r in rows:
            if row_group(r) not in groups:
                groups.append(row_group(r))
        for g in groups:
            suffix = (" " + " ".join(g)) if len(groups) > 1 else ""
            series.append((path, run, [r for r in rows if row_group(r) == g], suffix))
    for i, (path, run, rows, suffix) in enumerate(series):
        color = colors[i % len(colors)]
        pts = [(row_size(r), row_value(r, inplace, False)) for r in rows]
        pts = sorted((s, v) for s, v in pts if s and s > 0 and v is not None)
        base = [(row_size(r), row_value(r, inplace, True)) for r in rows]
        base = sorted((s, v) for s, v in base if s and s > 0 and v is not None)
        label = run_label(run, path) + suffix
        if pts:
            ax.plot([s for s, _ in pts], [v for _, v in pts], marker="o", ms=3, color=color, label=label)
            sizes_seen.update(s for s, _ in pts)
            lines += 1
        if base:
            ax.plot([s for s, _ in base], [v for _, v in base], linestyle="--", marker="x", ms=3, color=color,
                    label=run_label(run, path, describe_baseline(run)) + suffix)
            sizes_seen.update(s for s, _ in base)
            lines += 1
        mt = machine_text(run.get("machine"))
        if mt and mt not in machines:
            machines.append(mt)
        ct = run_command(run)
        if ct and ct not in commands:
            commands.append(ct)
    if lines == 0:
        plt.close(fig)
        raise ValueError("no rows with a size and a bus bandwidth in the input")

    ax.set_xscale("log", base=2)
    lo = int(math.floor(math.log2(min(sizes_seen))))
    hi = int(math.ceil(math.log2(max(sizes_seen))))
    step = max(1, math.ceil((hi - lo + 1) / 14))  # at most 14 labelled ticks
    ticks = [2 ** e for e in range(lo, hi + 1, step)]
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(t) for t in ticks], rotation=45, ha="right")
    ax.minorticks_off()
    ax.set_xlabel("message size")
    ax.set_ylabel("bus bandwidth, " + ("in place" if inplace else "out of place") + " (GB/s)")
    ax.set_ylim(bottom=0)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="best")

    if title is None:
        title = "; ".join(machines) if machines else "bus bandwidth"
        if len(commands) == 1:
            title += "\n" + commands[0]
    ax.set_title(title, fontsize=9)
    if len(commands) > 1:
        fig.text(0.01, 0.005, "\n".join(commands), fontsize=6, va="bottom", ha="left", family="monospace")
        fig.subplots_adjust(bottom=0.18 + 0.02 * len(commands))
    else:
        fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return lines


# ---------------------------------------------------------------------------------------------------------

def synthetic_run(ranks, scale, compare):
    rows = []
    size = 8
    while size <= 256 << 20:
        bw = scale * 10.0 * size / (size + 64 * 1024)
        row = {"size": size, "count": size // 4, "type": "float", "redop": "sum",
               "time_oop": size / (bw * 1e3) if bw else 0, "busbw_oop": bw, "busbw_ip": bw * 0.9}
        if compare:
            row["mpi_busbw_oop"] = bw * 0.4
        rows.append(row)
        size *= 4
    return {"machine": {"hostname": "selftest", "cpu": "Synthetic CPU", "cores": 2},
            "command": f"conflux-perf allreduce --ranks {ranks} --compare mpi --pin -b 8 -e 256M -f 4 -J out.json",
            "collective": "allreduce", "ranks": ranks, "backend": "conflux", "rows": rows}


def synthetic_perf_run(ranks, ops):
    """The same curve in conflux-perf's own -J layout ("conflux-perf/1"), sweeping several ops."""
    flat = synthetic_run(ranks, 0.6, compare=True)
    results = []
    for op in ops:
        for r in flat["rows"]:
            place = {"time": r["time_oop"], "alg_bw": r["busbw_oop"], "bus_bw": r["busbw_oop"], "nwrong": 0}
            mpi = dict(place, bus_bw=r["mpi_busbw_oop"])
            results.append({"size": r["size"], "count": r["count"], "type": "float", "redop": op, "root": -1,
                            "out_of_place": place, "in_place": None,
                            "compare": {"out_of_place": mpi, "in_place": None, "ratio": {}, "skipped": None}})
    return {"schema": "conflux-perf/1", "command_line": flat["command"],
            "machine": {"hostname": "selftest", "cpu_model": "Synthetic CPU", "cores": 2},
            "collective": "allreduce", "ranks": ranks, "backends": ["conflux", "mpi"], "results": results,
            "compare": {"backend": "mpi"}}


def selftest(plt):
    with tempfile.TemporaryDirectory(prefix="conflux-plot-") as tmp:
        paths = []
        for ranks, scale in ((2, 1.0), (4, 0.7)):  # 2 x (conflux + mpi) = 4 lines
            p = os.path.join(tmp, f"run{ranks}.json")
            with open(p, "w") as f:
                json.dump(synthetic_run(ranks, scale, compare=True), f)
            paths.append(p)
        # A lenient variant: a list holding one run with "busbw" and "bytes" keys and no baseline: 1 line.
        legacy = synthetic_run(8, 0.5, compare=False)
        legacy["rows"] = [{"bytes": r["size"], "busbw": r["busbw_oop"]} for r in legacy["rows"]]
        p = os.path.join(tmp, "legacy.json")
        with open(p, "w") as f:
            json.dump([legacy], f)
        paths.append(p)
        # conflux-perf's nested layout with two ops: 2 x (conflux + mpi) = 4 lines.
        perf_run = synthetic_perf_run(3, ["sum", "max"])
        p = os.path.join(tmp, "perf.json")
        with open(p, "w") as f:
            json.dump(perf_run, f)
        paths.append(p)
        row = perf_run["results"][-1]
        parsed = (row_size(row), row_value(row, False, False), row_value(row, False, True),
                  row_time(row, False, False), row_value(row, True, False), describe_baseline(perf_run))
        want = (row["size"], row["out_of_place"]["bus_bw"], row["compare"]["out_of_place"]["bus_bw"],
                row["out_of_place"]["time"], None, "mpi")
        out = os.path.join(tmp, "selftest.png")
        lines = plot(plt, list(load_inputs(paths)), out)
        with open(out, "rb") as f:
            magic = f.read(8)
        ok = lines == 9 and parsed == want and magic == b"\x89PNG\r\n\x1a\n" and os.path.getsize(out) > 10000
        if assert_size_labels() and ok:
            print(f"plot.py selftest: ok ({lines} lines, {os.path.getsize(out)} bytes)")
            return 0
        print(f"plot.py selftest: FAILED (lines={lines}, parsed={parsed}, want={want}, magic={magic!r})",
              file=sys.stderr)
        return 1


def assert_size_labels():
    want = {8: "8B", 1024: "1KiB", 65536: "64KiB", 1 << 20: "1MiB", 256 << 20: "256MiB", 1 << 30: "1GiB",
            1536: "1536B"}
    bad = {k: size_label(k) for k, v in want.items() if size_label(k) != v}
    if bad:
        print(f"plot.py selftest: size labels wrong: {bad}", file=sys.stderr)
    return not bad


def load_inputs(paths):
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        for run in runs_from(doc, path):
            yield path, run


def main(argv):
    ap = argparse.ArgumentParser(description="Plot busbw against size from conflux-perf -J JSON files.")
    ap.add_argument("inputs", nargs="*", help="JSON files written by conflux-perf -J")
    ap.add_argument("-o", "--output", help="PNG to write")
    ap.add_argument("--inplace", action="store_true", help="plot the in-place bus bandwidth (busbw_ip)")
    ap.add_argument("--title", help="title instead of machine and command")
    ap.add_argument("--selftest", action="store_true", help="plot synthetic data and check the PNG")
    args = ap.parse_args(argv)

    plt = load_matplotlib()
    if plt is None:
        print("plot.py: matplotlib is not available for this interpreter "
              f"({sys.executable}); use /usr/bin/python3 (Debian: apt-get install python3-matplotlib)",
              file=sys.stderr)
        return SKIP
    if args.selftest:
        return selftest(plt)
    if not args.inputs or not args.output:
        ap.error("give one or more JSON files and -o OUTPUT.png (or --selftest)")
    try:
        inputs = list(load_inputs(args.inputs))
        plot(plt, inputs, args.output, inplace=args.inplace, title=args.title)
    except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        print(f"plot.py: {e}", file=sys.stderr)
        return 1
    print(f"plot.py: wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
