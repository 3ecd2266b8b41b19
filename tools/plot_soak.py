#!/usr/bin/env python3
"""Plots the resources sampled by the soak (tests/multiproc/test_soak.cc): rank 0's resident memory,
descriptors and threads against the cases run, one line per run.

    CONFLUX_SOAK_CASES=100000 build/ci/tests/multiproc/test_soak > soak.txt
    tools/plot_soak.py soak.txt [more.txt ...] -o docs/soak-resources.png
"""
import argparse
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LINE = re.compile(r"soak nodes (\d+): cases (\d+) s [\d.]+ rss_kib (\d+) fds (\d+) threads (\d+) shm (\d+)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()
    runs = {}
    for path in args.files:
        with open(path) as f:
            for line in f:
                m = LINE.search(line)
                if m:
                    nodes, cases, rss, fds, threads, _ = map(int, m.groups())
                    label = f"{path.split('/')[-1]}: 4 ranks, {nodes} node(s)"
                    runs.setdefault(label, []).append((cases, rss / 1024, fds, threads))
    fig, (ax_rss, ax_fd) = plt.subplots(1, 2, figsize=(11, 4))
    for label, pts in runs.items():
        cases = [p[0] for p in pts]
        ax_rss.plot(cases, [p[1] for p in pts], label=label)
        ax_fd.plot(cases, [p[2] for p in pts], label=label)
    ax_rss.set_xlabel("cases run by rank 0's main thread")
    ax_rss.set_ylabel("rank 0 resident memory (MiB)")
    ax_rss.set_ylim(bottom=0)
    ax_fd.set_xlabel("cases run by rank 0's main thread")
    ax_fd.set_ylabel("rank 0 open descriptors")
    ax_fd.set_ylim(bottom=0)
    for ax in (ax_rss, ax_fd):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Soak: resources stay flat under random collectives")
    fig.tight_layout()
    fig.savefig(args.output, dpi=110)


if __name__ == "__main__":
    main()
