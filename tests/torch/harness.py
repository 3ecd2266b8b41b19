"""Runs a test body in N processes (forked, or spawned where a GPU is present) joined by one process group,
and reports every rank's outcome.

Each rank runs ``body(rank, world, *args)`` after ``init_process_group(backend, ...)`` (file:// rendezvous
in a fresh temporary directory unless ``init`` says otherwise). A rank passes when its body returns
without raising; the parent raises AssertionError naming every rank that failed, raised, hung past
``timeout`` seconds (then it is killed) or died.
"""

import multiprocessing
import os
import tempfile
import traceback

import torch  # (forked children inherit it; spawned ones import it anyway)


def _child(rank, world, backend, init, body, args, results, env, init_kwargs):
    os.environ.update(env)
    import torch.distributed as dist

    try:
        if init is not None and backend is not None:
            kwargs = {"init_method": init, "rank": rank, "world_size": world, **init_kwargs}
            if "device_id" in kwargs:
                kwargs["device_id"] = torch.device(kwargs["device_id"])
            if "timeout_s" in kwargs:
                import datetime

                kwargs["timeout"] = datetime.timedelta(seconds=kwargs.pop("timeout_s"))
            dist.init_process_group(backend, **kwargs)
        body(rank, world, *args)
        if backend is not None and dist.is_initialized():
            dist.destroy_process_group()
        results.put((rank, None))
    except BaseException:  # noqa: BLE001  (every failure is reported to the parent)
        results.put((rank, traceback.format_exc()))


def _start_method():
    """fork where no GPU is present: the ranks inherit the imported torch instead of importing it again (most
    of a short test's time); spawn where CUDA may be used (it does not survive a fork), or when
    CONFLUX_TORCH_TEST_START=spawn asks for a fresh interpreter per rank."""
    asked = os.environ.get("CONFLUX_TORCH_TEST_START", "")
    if asked in ("fork", "spawn"):
        return asked
    if asked:
        raise ValueError(f"CONFLUX_TORCH_TEST_START={asked!r}: expected fork or spawn")
    return "spawn" if torch.cuda.is_available() else "fork"


def run_ranks(world, body, *args, backend="conflux", init="file", timeout=240, env=None, expect_dead=(),
              **init_kwargs):
    """Runs body on `world` ranks; raises AssertionError describing failed ranks. Ranks in `expect_dead`
    must die or be killed (a test that kills or stops them); init_kwargs go to init_process_group
    (device_id as a string, timeout_s as seconds)."""
    ctx = multiprocessing.get_context(_start_method())
    results = ctx.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        if init == "file":
            init = "file://" + os.path.join(tmp, "rendezvous")
        procs = [ctx.Process(target=_child, args=(r, world, backend, init, body, args, results, env or {}, init_kwargs))
                 for r in range(world)]
        for p in procs:
            p.start()
        outcomes = {}
        try:
            for _ in range(world - len(expect_dead)):
                rank, error = results.get(timeout=timeout)
                outcomes[rank] = error
        except Exception:  # noqa: BLE001  (queue.Empty: a rank hung or died silently)
            pass
        for r, p in enumerate(procs):
            if r in expect_dead and p.is_alive():
                p.kill()  # stopped or stuck on purpose
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    problems = []
    for r, p in enumerate(procs):
        if r in expect_dead:
            if r in outcomes:
                problems.append(f"rank {r}: expected to die, but it finished")
            continue
        if r not in outcomes:
            problems.append(f"rank {r}: no result (exit code {p.exitcode}; hung or died)")
        elif outcomes[r] is not None:
            problems.append(f"rank {r}:\n{outcomes[r]}")
    if problems:
        raise AssertionError("\n".join(problems))


def assert_same_training(world, body, *args, baseline="gloo", rtol=1e-5, atol=1e-6, replicas_equal=False):
    """Runs ``body(rank, world, out_dir, *args)`` on `world` ranks under `baseline`, then under conflux; each
    body saves its state dict as ``<backend>_<rank>.pt`` in out_dir. Asserts every rank's conflux state
    matches the baseline's within (rtol, atol) and, with `replicas_equal`, that the conflux ranks agree
    exactly with rank 0 (data parallelism keeps replicas equal)."""
    with tempfile.TemporaryDirectory() as out:
        for backend in (baseline, "conflux"):
            run_ranks(world, body, out, *args, backend=backend)
        first = None
        for r in range(world):
            a = torch.load(os.path.join(out, f"conflux_{r}.pt"))
            b = torch.load(os.path.join(out, f"{baseline}_{r}.pt"))
            assert a.keys() == b.keys(), f"rank {r}: parameters {sorted(a)} vs {baseline}'s {sorted(b)}"
            for k in a:
                torch.testing.assert_close(a[k], b[k], rtol=rtol, atol=atol, msg=f"rank {r} parameter {k}")
            if not replicas_equal:
                continue
            if first is None:
                first = a
                continue
            for k in a:
                torch.testing.assert_close(a[k], first[k], rtol=0, atol=0, msg=f"replica {r} vs 0: {k}")
