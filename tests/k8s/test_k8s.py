#!/usr/bin/env python3
"""The Kubernetes manifests of deploy/k8s, checked without a cluster (none can run here):

  validate     every manifest against Kubernetes' schemas (kubernetes-validate from PyPI, strict: unknown
               fields are errors); a PyTorchJob against the training operator's API types (the
               kubeflow-training package's models, every field known and of its type), and each of its pod
               templates against Kubernetes' PodTemplate schema
  indexed_job  the Indexed Job's contract: each pod's command run as the kubelet would run it, with exactly
               the environment the manifest and the Job controller give it (JOB_COMPLETION_INDEX, the
               Secret's value, the pod's hostname), one simulated node per pod (network namespaces,
               tests/netns), the headless Service's DNS names in /etc/hosts, written 1.5 s after the pods
               start (as records appear in a cluster); every pod exits 0 and rank 0's conflux-perf checked
               every size
  pytorchjob   the PyTorchJob's contract: the master and the worker pod run torchrun with the variables the
               training operator sets (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, PET_NNODES, PET_NODE_RANK,
               PET_NPROC_PER_NODE), $(VAR) references expanded as the kubelet does, on two simulated nodes;
               every process's all-reduce on the conflux backend is right

  test_k8s.py SCENARIO --deploy DEPLOY_DIR [--perf conflux-perf] [--python VENV_PYTHON]

Exit code 0 on success, 1 on a failure, 77 when what it needs is missing (the packages from PyPI, root for
namespaces, torch).
"""
import argparse
import glob
import importlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "netns"))
SKIP_RC = 77
SECRET = "a1" * 32  # the test's value of the Secret the Indexed Job reads


def fail(msg):
    print("FAIL: " + msg)
    return 1


def load_docs(path):
    import yaml
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


# ---- validation ----

def model_class(name):
    for mod in ("kubeflow.training.models", "kubernetes.client.models"):
        m = importlib.import_module(mod)
        if hasattr(m, name):
            return getattr(m, name)
    raise KeyError(name)


def check_typed(value, type_name, where, errors):
    """Walks @p value (parsed YAML) against an OpenAPI-generated model type name: every key must be a known
    field, every value of its type."""
    primitives = {"str": str, "int": int, "bool": bool, "float": (int, float)}
    if type_name in primitives:
        if not isinstance(value, primitives[type_name]) or (type_name == "int" and isinstance(value, bool)):
            errors.append("%s: %r is not %s" % (where, value, type_name))
        return
    if type_name in ("object", "datetime"):
        return
    m = re.fullmatch(r"list\[(.*)\]", type_name)
    if m:
        if not isinstance(value, list):
            errors.append("%s: not a list" % where)
            return
        for i, v in enumerate(value):
            check_typed(v, m.group(1), "%s[%d]" % (where, i), errors)
        return
    m = re.fullmatch(r"dict\(str, (.*)\)", type_name)
    if m:
        if not isinstance(value, dict):
            errors.append("%s: not a mapping" % where)
            return
        for k, v in value.items():
            check_typed(v, m.group(1), "%s.%s" % (where, k), errors)
        return
    cls = model_class(type_name)
    if not isinstance(value, dict):
        errors.append("%s: not a mapping (%s)" % (where, type_name))
        return
    by_json = {j: a for a, j in cls.attribute_map.items()}
    for k, v in value.items():
        if k not in by_json:
            errors.append("%s: unknown field %r of %s" % (where, k, type_name))
            continue
        check_typed(v, cls.openapi_types[by_json[k]], "%s.%s" % (where, k), errors)


def validate(args):
    try:
        import kubernetes_validate
        import kubeflow.training.models  # noqa: F401
        import yaml  # noqa: F401
    except ImportError as e:
        print("k8s: skipped: %s (pip install kubernetes-validate kubeflow-training)" % e)
        return SKIP_RC
    version = kubernetes_validate.latest_version()
    manifests = sorted(glob.glob(os.path.join(args.deploy, "k8s", "*.yaml")))
    if not manifests:
        return fail("no manifests in %s/k8s" % args.deploy)
    checked = 0
    for path in manifests:
        for doc in load_docs(path):
            what = "%s: %s/%s" % (os.path.basename(path), doc.get("kind"), doc.get("metadata", {}).get("name"))
            if doc.get("apiVersion") == "kubeflow.org/v1" and doc.get("kind") == "PyTorchJob":
                errors = []
                check_typed(doc, "KubeflowOrgV1PyTorchJob", "PyTorchJob", errors)
                if errors:
                    return fail("%s against the training operator's types: %s" % (what, "; ".join(errors)))
                specs = doc["spec"]["pytorchReplicaSpecs"]
                if "Master" not in specs or any(c["name"] != "pytorch" for s in specs.values()
                                                for c in s["template"]["spec"]["containers"]):
                    return fail("%s: the operator needs a Master and containers named pytorch" % what)
                for role, spec in specs.items():
                    template = {"apiVersion": "v1", "kind": "PodTemplate",
                                "metadata": {"name": "%s-%s" % (doc["metadata"]["name"], role.lower())},
                                "template": spec["template"]}
                    try:
                        kubernetes_validate.validate(template, version, strict=True)
                    except kubernetes_validate.ValidationError as e:
                        return fail("%s, %s's pod template: %s" % (what, role, str(e).splitlines()[0]))
            else:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    return fail("%s: %s" % (what, str(e).splitlines()[0]))
            print("valid: %s (Kubernetes %s)" % (what, version))
            checked += 1
    print("validate: %d resources" % checked)
    return 0


# ---- contracts: pods as the kubelet would run them, on simulated nodes ----

def expand(text, env):
    """The kubelet's $(VAR) expansion in command and args: $$ escapes, unknown references stay as written."""
    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


def container_env(container, secrets):
    env = {}
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = expand(str(e["value"]), env)
        else:
            ref = e["valueFrom"]["secretKeyRef"]
            env[e["name"]] = secrets[(ref["name"], ref["key"])]
    return env


class Pods:
    """Pods on simulated nodes (one per node), each a host of its own (netns_cluster.Cluster.host_args)."""

    def __init__(self, nodes, names):
        import netns_cluster as nc
        self.nc = nc
        self.cluster = nc.Cluster(nodes=nodes)
        self.names = names  # DNS names of each node's pod (first: its hostname)
        self.dir = None

    def __enter__(self):
        self.nc.remove_stale_tempdirs("cfx-k8s-")  # runs killed outright (SIGKILL) left theirs
        self.cluster.__enter__()
        self.dir = self.nc.owned_tempdir("cfx-k8s-")
        self.hosts = os.path.join(self.dir, "hosts")
        self.publish_names(False)
        os.chmod(self.hosts, 0o644)
        return self

    def publish_names(self, on=True):
        """The pods' DNS names in every pod's /etc/hosts (rewritten in place: the pods' bind mounts see it),
        or (on=False) none yet, as in a cluster where a pod's record appears after it starts."""
        with open(self.hosts, "w") as f:
            f.write("127.0.0.1 localhost\n")
            for i, names in enumerate(self.names):
                if on:
                    f.write("%s %s\n" % (self.cluster.addr(i), " ".join(names)))

    def __exit__(self, *exc):
        try:
            self.cluster.__exit__(*exc)
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, i, cmd, env, cwd=None):
        full = dict(os.environ)
        full.update(env)
        return subprocess.Popen(self.cluster.host_args(i, cmd, self.names[i][0], self.hosts), env=full,
                                cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_all(procs, timeout):
    """Every pod's output, read as it comes (one thread each: a pod writing much must not stall), after all
    exited or `timeout` passed (the rest killed, by their process ids)."""
    outs = [[] for _ in procs]
    readers = [threading.Thread(target=lambda p=p, o=o: o.extend(p.stdout), daemon=True) for p, o in zip(procs, outs)]
    for r in readers:
        r.start()
    end = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            outs[procs.index(p)].append("\n(killed after the timeout)\n")
    for r in readers:
        r.join(timeout=10)
    return ["".join(o) for o in outs]


def indexed_job(args):
    docs = load_docs(os.path.join(args.deploy, "k8s", "conflux-indexed-job.yaml"))
    svc = next(d for d in docs if d["kind"] == "Service")
    job = next(d for d in docs if d["kind"] == "Job")
    name, spec = job["metadata"]["name"], job["spec"]
    pod = spec["template"]["spec"]
    n = spec["completions"]
    if spec.get("completionMode") != "Indexed" or pod.get("subdomain") != svc["metadata"]["name"]:
        return fail("the Job must be Indexed and its pods in the headless Service's subdomain")
    container = pod["containers"][0]
    # The pod of index i: hostname <job>-<i>, DNS name <hostname>.<subdomain> (the search path resolves it
    # in the pod's namespace), JOB_COMPLETION_INDEX from the Job controller.
    names = [["%s-%d" % (name, i), "%s-%d.%s" % (name, i, pod["subdomain"])] for i in range(n)]
    base = container_env(container, {(name, "secret"): SECRET})
    path = os.path.dirname(os.path.abspath(args.perf)) + os.pathsep + os.environ.get("PATH", "")
    t = time.monotonic()
    with Pods(n, names) as pods:
        procs = []
        for i in range(n):
            env = dict(base, JOB_COMPLETION_INDEX=str(i), HOSTNAME=names[i][0], PATH=path)
            cmd = [expand(c, env) for c in container["command"] + container.get("args", [])]
            procs.append(pods.start(i, cmd, env))
        # The Service's records appear after the pods start: the ranks must wait for them, not fail.
        time.sleep(1.5)
        pods.publish_names()
        outs = wait_all(procs, 200)
    for i, (p, out) in enumerate(zip(procs, outs)):
        print("---- pod %s (exit %s)\n%s" % (names[i][0], p.returncode, out[-3000:]))
    print("indexed_job: %d pods, %.1f s" % (n, time.monotonic() - t))
    if any(p.returncode != 0 for p in procs):
        return fail("pods exited %s" % [p.returncode for p in procs])
    if "# Out of bounds values : 0 OK" not in outs[0] or "%d ranks (launcher environment)" % n not in outs[0]:
        return fail("rank 0 did not report %d ranks with every size correct" % n)
    return 0


def pytorchjob(args):
    if not args.python or subprocess.run([args.python, "-c", "import torch, conflux_torch"],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode != 0:
        print("k8s: skipped: no Python with torch and conflux_torch (CONFLUX_TORCH_PYTHON)")
        return SKIP_RC
    doc = load_docs(os.path.join(args.deploy, "k8s", "conflux-pytorchjob.yaml"))[0]
    name, spec = doc["metadata"]["name"], doc["spec"]
    nproc = int(spec["nprocPerNode"])
    roles = [("Master", i) for i in range(spec["pytorchReplicaSpecs"]["Master"]["replicas"])] + \
            [("Worker", i) for i in range(spec["pytorchReplicaSpecs"].get("Worker", {}).get("replicas", 0))]
    master = spec["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    port = next(p["containerPort"] for p in master["ports"] if p["name"] == "pytorchjob-port")
    # Pod names (and the operator's services of the same names): <job>-<role>-<index>.
    names = [["%s-%s-%d" % (name, role.lower(), i)] for role, i in roles]
    venv_bin = os.path.dirname(os.path.abspath(args.python))
    t = time.monotonic()
    with Pods(len(roles), names) as pods:
        procs = []
        for node, (role, i) in enumerate(roles):
            container = spec["pytorchReplicaSpecs"][role]["template"]["spec"]["containers"][0]
            rank = i if role == "Master" else i + 1
            # What the training operator adds to the container's environment (kubeflow.org/v1).
            env = dict(container_env(container, {}), PYTHONUNBUFFERED="0", MASTER_PORT=str(port),
                       MASTER_ADDR="%s-master-0" % name, WORLD_SIZE=str(len(roles) * nproc), RANK=str(rank),
                       PET_NPROC_PER_NODE=str(nproc), PET_NODE_RANK=str(rank), PET_NNODES=str(len(roles)),
                       HOSTNAME=names[node][0], PATH=venv_bin + os.pathsep + os.environ.get("PATH", ""))
            cmd = [expand(c, env) for c in container["command"] + container.get("args", [])]
            # The image's working directory holds the script: here, deploy/k8s.
            procs.append(pods.start(node, cmd, env, cwd=os.path.join(args.deploy, "k8s")))
        pods.publish_names()
        outs = wait_all(procs, 200)
    oks = set()
    for node, (p, out) in enumerate(zip(procs, outs)):
        print("---- pod %s (exit %s)\n%s" % (names[node][0], p.returncode, out[-3000:]))
        oks |= set(int(r) for r in re.findall(r"allreduce_check: rank (\d+)/%d: ok" % (len(roles) * nproc), out))
    print("pytorchjob: %d pods x %d processes, %.1f s, ranks ok %s" % (len(roles), nproc, time.monotonic() - t,
                                                                        sorted(oks)))
    if any(p.returncode != 0 for p in procs):
        return fail("pods exited %s" % [p.returncode for p in procs])
    if oks != set(range(len(roles) * nproc)):
        return fail("ranks whose all-reduce was right: %s" % sorted(oks))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", choices=["validate", "indexed_job", "pytorchjob"])
    ap.add_argument("--deploy", required=True)
    ap.add_argument("--perf")
    ap.add_argument("--python")
    args = ap.parse_args()
    if args.scenario == "validate":
        return validate(args)
    import netns_cluster as nc
    why = nc.capability_problem()
    if why:
        print("netns: skipped: " + why)
        return SKIP_RC
    try:
        import yaml  # noqa: F401
    except ImportError:
        print("k8s: skipped: no PyYAML")
        return SKIP_RC
    return indexed_job(args) if args.scenario == "indexed_job" else pytorchjob(args)


if __name__ == "__main__":
    sys.exit(main())
