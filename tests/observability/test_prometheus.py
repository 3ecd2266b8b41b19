#!/usr/bin/env python3
"""Conflux's metrics through a real Prometheus and node_exporter, on 127.0.0.1 only.

Starts a multi-rank conflux-perf all-reduce job with CONFLUX_METRICS_ADDR (every rank serves /metrics on
PORT + local rank) and CONFLUX_METRICS_FILE (a textfile per rank), and a second job of two ranks on two
simulated nodes (libfabric's tcp provider on 127.0.0.1: the network and per-NIC series), Debian's
prometheus scraping the ranks
and prometheus-node-exporter serving the textfiles, all as plain processes with their files in a
temporary directory, and asks Prometheus's HTTP API the questions operators ask: bytes per second per
collective, latency quantiles from the histogram, the desync expression, the textfile path, and every
query of the Grafana dashboard (deploy/grafana). Also runs `promtool check metrics` on a rank's
exposition and `promtool test rules` on the alert rules (deploy/prometheus). Exits 77 (skipped) when
prometheus, promtool or the node exporter is not installed.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

RANKS = 3
NODES = 2  # the second job: one rank on each of two simulated nodes


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_prometheus(binary, config, data, port, log, tries=3):
    """(port, process) of a Prometheus server that answers /-/ready within 60 s. The port was free when
    picked but another test running beside this one may take it first: a server that exits is started
    again on a new port, up to `tries` times."""
    for attempt in range(tries):
        server = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={data}",
                                   f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log)
        end = time.monotonic() + 60
        while time.monotonic() < end and server.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return port, server
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.25)
        if server.poll() is None:
            server.kill()
            server.wait()
            raise AssertionError(f"prometheus on port {port} was not ready within 60 s (servers.log)")
        print(f"prometheus on port {port} exited with {server.returncode} (try {attempt + 1} of {tries})", flush=True)
        port = free_port()
    raise AssertionError(f"prometheus did not start in {tries} tries (servers.log)")


def free_port_range(n):
    for _ in range(50):
        base = free_port()
        if base + n > 65535:
            continue
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            pass
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode(), r.headers


def query(prom, expr):
    body, _ = get(f"http://127.0.0.1:{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    reply = json.loads(body)
    if reply.get("status") != "success":
        raise AssertionError(f"query failed: {expr}: {reply}")
    return reply["data"]["result"]


def wait_for(what, check, seconds):
    end = time.monotonic() + seconds
    last = None
    while time.monotonic() < end:
        try:
            if check():
                return
        except Exception as e:  # the servers are still starting
            last = e
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}" + (f" (last error: {last})" if last else ""))


class Failures:
    def __init__(self):
        self.items = []

    def check(self, ok, what):
        print(("ok    " if ok else "FAIL  ") + what, flush=True)
        if not ok:
            self.items.append(what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perf", required=True, help="conflux-perf binary")
    ap.add_argument("--deploy", required=True, help="the deploy/ folder")
    ap.add_argument("--seconds", type=float, default=12, help="seconds of data before the queries")
    ap.add_argument("--ofi", choices=("yes", "no"), default="yes",
                    help="whether the build has libfabric: without it there is no two-node job, so no NIC series")
    args = ap.parse_args()

    tools = {name: shutil.which(name) for name in ("prometheus", "promtool", "prometheus-node-exporter")}
    missing = [n for n, p in tools.items() if p is None]
    if missing:
        print("prometheus test: skipped: not installed: " + ", ".join(missing) +
              " (apt-get install prometheus prometheus-node-exporter)")
        return 77

    nodes = NODES if args.ofi == "yes" else 0
    f = Failures()
    tmp = tempfile.mkdtemp(prefix="cfx-prom-")
    procs = []
    try:
        textdir = os.path.join(tmp, "textfile")
        os.makedirs(textdir)
        base, prom, node = free_port_range(RANKS), free_port(), free_port()
        nodes_base, bootstrap = free_port_range(NODES), free_port()  # unused without libfabric
        rules = os.path.abspath(os.path.join(args.deploy, "prometheus", "conflux-alerts.yml"))
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as c:
            c.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n")
            c.write(f"rule_files:\n  - {rules}\n")
            c.write("scrape_configs:\n")
            targets = ", ".join(f"'127.0.0.1:{base + r}'" for r in range(RANKS))
            c.write(f"  - job_name: conflux\n    static_configs:\n      - targets: [{targets}]\n")
            c.write(f"  - job_name: node\n    static_configs:\n      - targets: ['127.0.0.1:{node}']\n")
            if nodes:
                targets = ", ".join(f"'127.0.0.1:{nodes_base + r}'" for r in range(nodes))
                c.write(f"  - job_name: conflux-nodes\n    static_configs:\n      - targets: [{targets}]\n")
        log = open(os.path.join(tmp, "servers.log"), "w")
        prom, server = start_prometheus(tools["prometheus"], config, os.path.join(tmp, "data"), prom, log)
        procs.append(server)
        procs.append(subprocess.Popen([tools["prometheus-node-exporter"], "--collector.disable-defaults",
                                       "--collector.textfile", f"--collector.textfile.directory={textdir}",
                                       f"--web.listen-address=127.0.0.1:{node}"], stdout=log, stderr=log))
        env = dict(os.environ, CONFLUX_METRICS_ADDR=f"127.0.0.1:{base}",
                   CONFLUX_METRICS_FILE=os.path.join(textdir, "conflux.%r.prom"),
                   CONFLUX_METRICS_INTERVAL_MS="500", CONFLUX_JOB_ID="prom-test")
        perf_log = open(os.path.join(tmp, "perf.log"), "w")
        # Its own session, so that the ranks it forks end with it (killpg of a group only we made).
        job = subprocess.Popen([args.perf, "allreduce", "--ranks", str(RANKS), "-b", "8", "-e", "1M", "-f", "4",
                                "-n", "200", "-N", "0"], env=env, stdout=perf_log, stderr=perf_log,
                               start_new_session=True)
        procs.append(job)
        # The two-node job: each rank started as a launcher would, its own node identity and its own
        # port (each is local rank 0 of its node); the network stays on loopback.
        secret = os.urandom(32).hex()
        for r in range(nodes):
            rank_env = dict(os.environ, CONFLUX_HOSTID=f"node{r}", CONFLUX_RANK=str(r), CONFLUX_NRANKS=str(nodes),
                            CONFLUX_LOCAL_RANK="0", CONFLUX_LOCAL_SIZE="1",
                            CONFLUX_BOOTSTRAP_ADDR=f"127.0.0.1:{bootstrap}", CONFLUX_SECRET=secret,
                            CONFLUX_OFI_ADDR="127.0.0.1", CONFLUX_TCP_ADDR="127.0.0.1",
                            CONFLUX_METRICS_ADDR=f"127.0.0.1:{nodes_base + r}", CONFLUX_JOB_ID="prom-nodes")
            procs.append(subprocess.Popen([args.perf, "allreduce", "-b", "8", "-e", "1M", "-f", "4", "-n", "200",
                                           "-N", "0"], env=rank_env, stdout=perf_log, stderr=perf_log,
                                          start_new_session=True))

        wait_for("every rank up in Prometheus",
                 lambda: sum(float(s["value"][1]) for s in query(prom, 'up{job="conflux"}')) == RANKS, 60)
        if nodes:
            wait_for("both ranks of the two-node job up in Prometheus",
                     lambda: sum(float(s["value"][1]) for s in query(prom, 'up{job="conflux-nodes"}')) == nodes, 60)
        wait_for("the textfiles through node_exporter",
                 lambda: len(query(prom, 'conflux_collective_operations_total{job="node",collective="allreduce"}'))
                 == RANKS, 60)
        time.sleep(args.seconds)
        f.check(job.poll() is None, "the conflux-perf job is still running")
        f.check(all(p.poll() is None for p in procs[3:]), "the two-node job is still running")

        rates = query(prom, 'sum by (collective) (rate(conflux_collective_bytes_total{job="conflux"}[5s]))')
        by = {s["metric"].get("collective"): float(s["value"][1]) for s in rates}
        f.check(by.get("allreduce", 0) > 0, f"rate of all-reduce bytes per second > 0: {by.get('allreduce')}")
        f.check(by.get("broadcast", -1) == 0, "no broadcast traffic in an all-reduce job")

        p50 = query(prom, 'histogram_quantile(0.5, sum by (le, size_class) (rate('
                          'conflux_collective_duration_seconds_bucket{job="conflux",collective="allreduce"}[5s])))')
        values = {s["metric"]["size_class"]: float(s["value"][1]) for s in p50}
        finite = {k: v for k, v in values.items() if v == v and 0 < v < 10}
        f.check(len(finite) >= 4, f"all-reduce p50 per size class from the histogram: {sorted(finite.items(), key=lambda kv: int(kv[0]))}")
        if "8" in finite and "1048576" in finite:
            f.check(finite["1048576"] > finite["8"], "1 MiB takes longer than 8 bytes")

        skew = query(prom, 'max by (comm_id) (conflux_collective_sequence{job="conflux"})'
                           ' - min by (comm_id) (conflux_collective_sequence{job="conflux"})')
        seq = query(prom, 'max by (comm_id) (conflux_collective_sequence{job="conflux"})')
        top = float(seq[0]["value"][1]) if len(seq) == 1 else 0
        f.check(top > 100, f"sequence numbers advance: {top}")
        # The ranks are scraped at different moments of a job making thousands of calls a second, so
        # they differ, but by far less than the calls made.
        f.check(len(skew) == 1 and 0 <= float(skew[0]["value"][1]) < top / 2,
                f"desync expression: one communicator, skew {skew[0]['value'][1] if skew else None} of {top}")

        node_ops = query(prom, 'conflux_collective_operations_total{job="node",collective="allreduce"}')
        f.check(len(node_ops) == RANKS and all(float(s["value"][1]) > 0 for s in node_ops),
                "textfile path: every rank's operations through node_exporter")
        f.check(all(s["metric"].get("job_id") == "prom-test" for s in node_ops), "job_id label from CONFLUX_JOB_ID")

        # The network between the simulated nodes, by peer class and by NIC.
        if nodes:
            remote = query(prom, 'sum by (rank) (rate(conflux_transport_sent_bytes_total{job="conflux-nodes",peer="remote"}[5s]))')
            f.check(len(remote) == nodes and all(float(s["value"][1]) > 0 for s in remote),
                    f"each rank of the two-node job sends to the other node: {remote}")
            nics = query(prom, 'sum by (host, nic) (rate(conflux_nic_received_bytes_total{job="conflux-nodes"}[5s]))')
            f.check(len(nics) == nodes and all(s["metric"].get("nic") and float(s["value"][1]) > 0 for s in nics),
                    f"bytes per NIC on each node: {nics}")

        # Every panel of the dashboard answers.
        panels = subprocess.run([sys.executable, os.path.join(args.deploy, "grafana", "panel_queries.py")],
                                check=True, capture_output=True, text=True).stdout
        queries = json.loads(panels)
        f.check(len(queries) >= 8, f"the dashboard has {len(queries)} queries")
        for q in queries:
            if not nodes and ("conflux_nic_" in q["expr"] or "retries" in q["expr"]):
                continue  # no network without libfabric here: nothing to show
            result = query(prom, q["expr"])
            f.check(len(result) > 0, f"panel '{q['panel']}' returns data: {q['expr']}")

        # The exposition passes promtool's lint, and the alert rules their unit tests.
        for port in (base, nodes_base) if nodes else (base,):
            exposition, headers = get(f"http://127.0.0.1:{port}/metrics")
            f.check(headers["Content-Type"].startswith("text/plain; version=0.0.4"), "Content-Type " + headers["Content-Type"])
            lint = subprocess.run([tools["promtool"], "check", "metrics"], input=exposition, capture_output=True, text=True)
            f.check(lint.returncode == 0, "promtool check metrics: " + (lint.stdout + lint.stderr).strip()[:500])
        rules_dir = os.path.join(args.deploy, "prometheus")
        tests = subprocess.run([tools["promtool"], "test", "rules", "conflux-alerts.test.yml"], cwd=rules_dir,
                               capture_output=True, text=True)
        f.check(tests.returncode == 0, "promtool test rules: " + (tests.stdout + tests.stderr).strip()[-500:])
        alerts = query(prom, 'ALERTS{alertstate="firing"}')
        f.check(not alerts, f"no alert fires on a healthy job: {[a['metric'].get('alertname') for a in alerts]}")
    finally:
        jobs = procs[2:]  # the jobs: each in a session of its own
        for p in procs:
            if p in jobs:
                try:
                    os.killpg(p.pid, signal.SIGTERM)  # the job's session: conflux-perf and its ranks
                except ProcessLookupError:
                    pass
            elif p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for p in jobs:
            try:  # ranks that outlived their leader
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if f.items or sys.exc_info()[0] is not None:
            for name in ("servers.log", "perf.log"):
                path = os.path.join(tmp, name)
                if os.path.exists(path):
                    print(f"--- {name} (tail)")
                    print(open(path).read()[-3000:])
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"prometheus test: {len(f.items)} failure(s)" if f.items else "prometheus test: passed")
    return 1 if f.items else 0


if __name__ == "__main__":
    sys.exit(main())
