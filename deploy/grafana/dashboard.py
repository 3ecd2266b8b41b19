#!/usr/bin/env python3
"""Generates the Grafana dashboard of Conflux's Prometheus metrics (conflux-dashboard.json).

    python deploy/grafana/dashboard.py > deploy/grafana/conflux-dashboard.json
    python deploy/grafana/dashboard.py --out deploy/grafana/conflux-dashboard.json

Needs grafanalib (pip install grafanalib). The output depends on nothing but this file, so the JSON
that is committed can be checked by generating it again and comparing.

Every query keeps to these rules, so that a test can run it against a Prometheus holding a job's data:
- the template variables appear only as label matchers, job_id=~"$job_id" and comm=~"$comm" (a test
  puts ".*" in their place; ".*" also matches the series of a job without a job_id label);
- windows are literal ([1m], [2m]), no Grafana macros such as $__rate_interval;
- nothing filters on a value that only a failing job has: the error counters are exported at 0, and
  the panels show them at 0;
- gauges are read with last_over_time(...[1m]), so a panel still shows a rank's last value for a
  minute after its process has gone (Prometheus marks its series stale at once otherwise).
"""

import argparse
import io
import json
import sys

from grafanalib.core import (
    Dashboard,
    GridPos,
    RowPanel,
    Stat,
    Table,
    Target,
    Template,
    Templating,
    Time,
    TimeSeries,
)
from grafanalib._gen import DashboardEncoder

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}

# The label matchers every communicator series gets.
SEL = 'job_id=~"$job_id", comm=~"$comm"'

# The collectives, and nccl-tests' bus-bandwidth factor of each as a PromQL expression of n (the
# communicator's ranks): busbw = algbw x factor.
FACTORS = [
    ("allreduce", "2 * ({n} - 1) / {n}"),
    ("allgather", "({n} - 1) / {n}"),
    ("reducescatter", "({n} - 1) / {n}"),
    ("alltoall", "({n} - 1) / {n}"),
    ("broadcast", "{n} / {n}"),
    ("reduce", "{n} / {n}"),
    ("sendrecv", "{n} / {n}"),
]

# Conflux's message-size classes: class c holds calls of (2^(c-1), 2^c] bytes, labelled size_class="2^c".
SIZE_CLASSES = 48


def ranks_expr():
    """The communicator's size, one series per (comm, comm_id)."""
    return f"max by (comm, comm_id) (last_over_time(conflux_communicator_ranks{{{SEL}}}[1m]))"


def factor_expr():
    """One series per (comm, comm_id, collective): the bus-bandwidth factor."""
    n = ranks_expr()
    terms = [
        f'label_replace({formula.format(n=n)}, "collective", "{coll}", "", "")' for coll, formula in FACTORS
    ]
    return "(\n    " + "\n  or ".join(terms) + "\n)"


def size_table_expr():
    """One series per size class, labelled size_class, whose value is the class's bytes."""
    terms = [f'label_replace(vector({1 << c}), "size_class", "{1 << c}", "", "")' for c in range(SIZE_CLASSES)]
    return "(\n    " + "\n  or ".join(terms) + "\n)"


def busbw_per_collective():
    return (
        "(\n"
        f"    sum by (comm, comm_id, collective) (rate(conflux_collective_bytes_total{{{SEL}}}[1m]))\n"
        "  /\n"
        f"    sum by (comm, comm_id, collective) (rate(conflux_collective_duration_seconds_sum{{{SEL}}}[1m]))\n"
        ")\n"
        f"* {factor_expr()}"
    )


def busbw_per_size_class():
    by = "sum by (comm, comm_id, collective, size_class)"
    return (
        "(\n"
        f"    {by} (rate(conflux_collective_duration_seconds_count{{{SEL}}}[1m]))\n"
        f"  * on (size_class) group_left () {size_table_expr()}\n"
        "  /\n"
        f"    {by} (rate(conflux_collective_duration_seconds_sum{{{SEL}}}[1m]))\n"
        ")\n"
        f"* on (comm, comm_id, collective) group_left () {factor_expr()}"
    )


def quantile(q):
    return (
        f"histogram_quantile({q}, sum by (le, comm, comm_id, collective, size_class) "
        f"(rate(conflux_collective_duration_seconds_bucket{{{SEL}}}[1m])))"
    )


def mean_latency():
    by = "sum by (comm, comm_id, collective, size_class)"
    return (
        f"{by} (rate(conflux_collective_duration_seconds_sum{{{SEL}}}[1m]))\n"
        f"/\n"
        f"{by} (rate(conflux_collective_duration_seconds_count{{{SEL}}}[1m]))"
    )


def gauge(metric, window="1m"):
    return f"last_over_time({metric}{{{SEL}}}[{window}])"


def target(expr, legend, ref="A", instant=False, fmt="time_series"):
    return Target(
        expr=expr,
        legendFormat=legend,
        refId=ref,
        instant=instant,
        format=fmt,
        datasource=DATASOURCE,
        intervalFactor=1,
    )


class Layout:
    """Places panels left to right in rows of 24 columns."""

    def __init__(self):
        self.panels = []
        self.x = 0
        self.y = 0
        self.height = 0

    def row(self, title):
        self._newline()
        self.panels.append(RowPanel(title=title, gridPos=GridPos(h=1, w=24, x=0, y=self.y)))
        self.y += 1

    def add(self, make, w, h, **kwargs):
        if self.x + w > 24:
            self._newline()
        self.panels.append(make(gridPos=GridPos(h=h, w=w, x=self.x, y=self.y), dataSource=DATASOURCE, **kwargs))
        self.x += w
        self.height = max(self.height, h)

    def _newline(self):
        self.y += self.height
        self.x = 0
        self.height = 0


def timeseries(**kwargs):
    kwargs.setdefault("legendDisplayMode", "table")
    kwargs.setdefault("legendCalcs", ["lastNotNull", "max"])
    kwargs.setdefault("tooltipMode", "multi")
    return TimeSeries(**kwargs)


def panels():
    p = Layout()

    p.row("Overview")
    p.add(
        Stat,
        w=8,
        h=5,
        title="Ranks per communicator",
        description="conflux_communicator_ranks: the ranks of each communicator.",
        targets=[target(ranks_expr(), "{{comm}}")],
        reduceCalc="lastNotNull",
        graphMode="none",
        textMode="value_and_name",
    )
    p.add(
        Stat,
        w=8,
        h=5,
        title="Ranks out of service",
        description="Ranks on which the communicator is out of service (conflux_communicator_healthy == 0) "
        "after an error or an abort. 0 on a healthy communicator.",
        targets=[
            target(
                f"sum by (comm, comm_id) (1 - {gauge('conflux_communicator_healthy')})",
                "{{comm}}",
            )
        ],
        reduceCalc="lastNotNull",
        graphMode="none",
        textMode="value_and_name",
        thresholds=[{"color": "green", "value": None}, {"color": "red", "value": 1}],
        colorMode="background",
    )
    p.add(
        Table,
        w=8,
        h=5,
        title="Conflux builds",
        description="conflux_build_info: the versions and build options of the ranks' libraries "
        "(one row per distinct build, with the number of ranks running it).",
        targets=[
            target(
                'count by (version, cuda, ofi) (last_over_time(conflux_build_info{job_id=~"$job_id"}[1m]))',
                "",
                instant=True,
                fmt="table",
            )
        ],
        transformations=[
            {"id": "organize", "options": {"excludeByName": {"Time": True}, "renameByName": {"Value": "ranks"}}}
        ],
    )

    p.row("Bandwidth")
    p.add(
        timeseries,
        w=12,
        h=9,
        title="Bus bandwidth per collective",
        description="nccl-tests' bus bandwidth: algbw x factor, algbw = bytes / time in calls (the bytes and "
        "the call time of all ranks summed over the last minute), factor 2(n-1)/n for allreduce, (n-1)/n for "
        "allgather, reducescatter and alltoall, 1 for broadcast, reduce and sendrecv (n: the communicator's "
        "ranks).",
        targets=[target(busbw_per_collective(), "{{comm}} {{collective}}")],
        unit="Bps",
    )
    p.add(
        timeseries,
        w=12,
        h=9,
        title="Bus bandwidth per collective and size class",
        description="Bus bandwidth of each size class, counting every call at its class's bytes (the power "
        "of two at or above its size): exact for power-of-two sizes, such as conflux-perf's sweeps, and up "
        "to twice too high for others.",
        targets=[target(busbw_per_size_class(), "{{comm}} {{collective}} {{size_class}} B")],
        unit="Bps",
    )

    p.row("Latency")
    p.add(
        timeseries,
        w=8,
        h=9,
        title="Latency p50 per collective and size class",
        description="Median call duration over the last minute, all ranks together, from "
        "conflux_collective_duration_seconds (buckets 1 us x 2^k).",
        targets=[target(quantile(0.5), "{{comm}} {{collective}} {{size_class}} B")],
        unit="s",
        scaleDistributionType="log",
    )
    p.add(
        timeseries,
        w=8,
        h=9,
        title="Latency p99 per collective and size class",
        description="99th-percentile call duration over the last minute, all ranks together.",
        targets=[target(quantile(0.99), "{{comm}} {{collective}} {{size_class}} B")],
        unit="s",
        scaleDistributionType="log",
    )
    p.add(
        timeseries,
        w=8,
        h=9,
        title="Mean latency per collective and size class",
        description="Time in calls / calls over the last minute, all ranks together.",
        targets=[target(mean_latency(), "{{comm}} {{collective}} {{size_class}} B")],
        unit="s",
        scaleDistributionType="log",
    )

    p.row("Operations and algorithms")
    p.add(
        timeseries,
        w=8,
        h=9,
        title="Operations per second per collective",
        description="Completed calls per second, summed over the ranks.",
        targets=[
            target(
                f"sum by (comm, comm_id, collective) (rate(conflux_collective_operations_total{{{SEL}}}[1m]))",
                "{{comm}} {{collective}}",
            )
        ],
        unit="ops",
    )
    p.add(
        timeseries,
        w=8,
        h=9,
        title="Algorithm chosen",
        description="Completed calls per second by the algorithm that ran them (ring, oneshot, hier, eager, "
        "p2p, device, ...), summed over the ranks.",
        targets=[
            target(
                "sum by (comm, comm_id, collective, algorithm) "
                f"(rate(conflux_collective_algorithm_operations_total{{{SEL}}}[1m]))",
                "{{comm}} {{collective}} {{algorithm}}",
            )
        ],
        unit="ops",
        stacking={"mode": "normal", "group": "A"},
        fillOpacity=20,
    )
    p.add(
        Table,
        w=8,
        h=9,
        title="Algorithm of the last call per size class",
        description="conflux_collective_algorithm_info: the algorithm of each collective's and size class's "
        "last call, with the number of ranks on which it was that one.",
        targets=[
            target(
                "count by (comm, collective, size_class, algorithm) "
                f"({gauge('conflux_collective_algorithm_info')})",
                "",
                instant=True,
                fmt="table",
            )
        ],
        transformations=[
            {"id": "organize", "options": {"excludeByName": {"Time": True}, "renameByName": {"Value": "ranks"}}}
        ],
    )

    p.row("Network")
    p.add(
        timeseries,
        w=12,
        h=8,
        title="Bytes per second per peer class",
        description="What plans sent, by transport and peer class (local: shm to this node's ranks; remote: the "
        "network to other nodes; nccl-net: NCCL's traffic through the Conflux net plugin), summed over the ranks.",
        targets=[
            target(
                f"sum by (transport, peer) (rate(conflux_transport_sent_bytes_total{{{SEL}}}[1m]))",
                "{{transport}} {{peer}}",
            )
        ],
        unit="Bps",
    )
    p.add(
        timeseries,
        w=12,
        h=8,
        title="Bytes per second per NIC",
        description="Bytes sent and received through each NIC (libfabric rail) per host, everything the rails "
        "carried; the NCCL net plugin's devices are included.",
        targets=[
            target(
                f"sum by (host, nic) (rate(conflux_nic_sent_bytes_total{{{SEL}}}[1m]))",
                "{{host}} {{nic}} sent",
            ),
            target(
                f"sum by (host, nic) (rate(conflux_nic_received_bytes_total{{{SEL}}}[1m]))",
                "{{host}} {{nic}} received",
                ref="B",
            ),
        ],
        unit="Bps",
    )
    p.add(
        timeseries,
        w=12,
        h=8,
        title="Waiting on peers",
        description="Share of each second the ranks spent blocked (after spinning) waiting on peers, by peer "
        "class: a rank that waits much less than the others is the one they wait for.",
        targets=[
            target(
                f"sum by (rank, peer) (rate(conflux_transport_wait_seconds_total{{{SEL}}}[1m]))",
                "rank {{rank}} {{peer}}",
            )
        ],
        unit="percentunit",
    )
    p.add(
        timeseries,
        w=12,
        h=8,
        title="Network retries per second",
        description="Posts the network refused for want of room (-FI_EAGAIN) and made again later, per host. A "
        "steady rate means the provider's queues are too small for the traffic.",
        targets=[
            target(
                f"sum by (host, transport) (rate(conflux_transport_retries_total{{{SEL}}}[1m]))",
                "{{host}} {{transport}}",
            )
        ],
        unit="reqps",
    )

    p.row("Errors")
    p.add(
        timeseries,
        w=12,
        h=8,
        title="Errors per second by kind",
        description="Failed calls per second by kind (timeout, remote_error, aborted, system_error, "
        "invalid_usage, invalid_argument, internal_error, cuda_error), summed over the ranks.",
        targets=[
            target(
                f"sum by (comm, comm_id, kind) (rate(conflux_collective_errors_total{{{SEL}}}[1m]))",
                "{{comm}} {{kind}}",
            )
        ],
        unit="reqps",
    )
    p.add(
        timeseries,
        w=12,
        h=8,
        title="Timeouts per second per rank",
        description="Calls per second that failed with a timeout (no progress for CONFLUX_TIMEOUT_MS), by rank.",
        targets=[
            target(
                "sum by (comm, comm_id, rank) "
                f'(rate(conflux_collective_errors_total{{{SEL}, kind="timeout"}}[1m]))',
                "{{comm}} rank {{rank}}",
            )
        ],
        unit="reqps",
    )

    p.row("Progress")
    p.add(
        timeseries,
        w=12,
        h=8,
        title="Sequence skew between ranks",
        description="max - min over a communicator's ranks of conflux_collective_sequence (the number of the "
        "last collective started, the same for the same call on every rank). The instantaneous spread "
        "includes the ranks' scrape offsets (calls per second x the offset); the held lag is the measure "
        "of the ConfluxCommunicatorDesync alert: the leading rank's lowest number over 2 minutes minus the "
        "last rank's highest, above 0 only while a rank stays behind.",
        targets=[
            target(
                f"max by (comm, comm_id) ({gauge('conflux_collective_sequence')})\n"
                f"-\nmin by (comm, comm_id) ({gauge('conflux_collective_sequence')})",
                "{{comm}} spread",
            ),
            target(
                f"max by (comm, comm_id) (min_over_time(conflux_collective_sequence{{{SEL}}}[2m]))\n"
                f"-\nmin by (comm, comm_id) (max_over_time(conflux_collective_sequence{{{SEL}}}[2m]))",
                "{{comm}} held lag (alert when > 0)",
                ref="B",
            ),
        ],
        unit="none",
    )
    p.add(
        timeseries,
        w=12,
        h=8,
        title="Collective sequence per rank",
        description="conflux_collective_sequence of each rank: a rank whose line stops below the others' is "
        "behind.",
        targets=[target(gauge("conflux_collective_sequence"), "{{comm}} rank {{rank}}")],
        unit="none",
    )
    p.add(
        timeseries,
        w=12,
        h=8,
        title="Calls in flight per rank",
        description="conflux_collective_in_flight: calls started and not yet ended (collectives and "
        "point-to-point batches).",
        targets=[target(gauge("conflux_collective_in_flight"), "{{comm}} rank {{rank}}")],
        unit="none",
    )
    p.add(
        timeseries,
        w=12,
        h=8,
        title="Seconds since last progress per rank",
        description="Now minus conflux_collective_last_progress_timestamp_seconds (when the rank's last call "
        "ended, completed or failed); ranks that have not ended a call yet (timestamp 0) are left out. "
        "ConfluxCollectiveStalled fires above 300 s with a call in flight.",
        targets=[
            target(
                f"(time() - {gauge('conflux_collective_last_progress_timestamp_seconds')})\n"
                f"and {gauge('conflux_collective_last_progress_timestamp_seconds')} > 0",
                "{{comm}} rank {{rank}}",
            )
        ],
        unit="s",
    )
    return p.panels


def variable(name, label, query):
    t = Template(
        name=name,
        label=label,
        query=query,
        dataSource=DATASOURCE,
        includeAll=True,
        allValue=".*",
        multi=True,
        refresh=2,  # on a time-range change: a new job's values appear
        sort=1,
    )
    return t


def dashboard():
    return Dashboard(
        title="Conflux collectives",
        uid="conflux-collectives",
        description="Conflux's per-rank Prometheus metrics: bandwidth, latency, algorithms, errors and progress "
        "of each communicator (generated by deploy/grafana/dashboard.py).",
        tags=["conflux"],
        timezone="browser",
        refresh="30s",
        time=Time("now-1h", "now"),
        schemaVersion=37,
        graphTooltip=1,
        templating=Templating(
            list=[
                Template(
                    name="datasource",
                    label="Data source",
                    query="prometheus",
                    type="datasource",
                    default="default",
                ),
                variable("job_id", "Job", 'label_values(conflux_build_info, job_id)'),
                variable("comm", "Communicator", 'label_values(conflux_communicator_ranks{job_id=~"$job_id"}, comm)'),
            ]
        ),
        panels=panels(),
    ).auto_panel_ids()


def render():
    data = json.loads(json.dumps(dashboard().to_json_data(), cls=DashboardEncoder))
    for var in data["templating"]["list"]:
        if var.get("includeAll"):
            # Open on "All" (Grafana's own encoding of it), which the allValue ".*" stands for.
            var["current"] = {"selected": True, "text": ["All"], "value": ["$__all"]}
    out = io.StringIO()
    json.dump(data, out, sort_keys=True, indent=2)
    out.write("\n")
    return out.getvalue()


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the dashboard JSON to this file (default: standard output)")
    args = parser.parse_args(argv)
    text = render()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
