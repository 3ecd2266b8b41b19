"""Every torch.distributed operation through the conflux backend, on every dtype torch and Conflux share and
every reduce op, on 2, 3 and 4 processes, against references computed with plain torch on each rank.

Inputs are small integers chosen so that every result is exact in every dtype (sums of at most 4 x 6,
products of 1s and 2s), so outputs are compared exactly. Run: python tests/torch/test_collectives.py
"""

import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import run_ranks  # noqa: E402

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int32, torch.int64]
COUNTS = [1, 7, 16411, 65539]  # odd; above the eager limit (64 KiB per rank): 16411 for 4- and 8-byte types, 65539 for all


def value(rank, n, dtype, op="sum"):
    """Rank `rank`'s input of n elements for `op`, exact in `dtype`."""
    i = torch.arange(n, dtype=torch.int64)
    if op == "product":
        v = torch.where((i + rank) % 3 == 0, 2, 1)
    elif op in ("band", "bor", "bxor"):
        v = (i * 5 + rank * 3) % 16
    elif dtype == torch.bool:
        v = (i + rank) % 3 == 0
    elif dtype in (torch.uint8,):
        v = (i * 13 + rank * 7) % 6
    else:
        v = (i * 13 + rank * 7) % 11 - 5
    return v.to(dtype)


def reduce_op(name):
    import torch.distributed as dist

    return getattr(dist.ReduceOp, name.upper())  # "sum" -> SUM, "product" -> PRODUCT, "bxor" -> BXOR, ...


def reference(inputs, op, dtype):
    """op over the ranks' inputs, computed in int64 (or float64 for complex) then cast: exact here."""
    wide = [x.to(torch.int64) if not x.is_complex() else x.to(torch.complex128) for x in inputs]
    acc = wide[0].clone()
    for x in wide[1:]:
        if op in ("sum", "avg"):
            acc = acc + x
        elif op == "product":
            acc = acc * x
        elif op == "min":
            acc = torch.minimum(acc, x)
        elif op == "max":
            acc = torch.maximum(acc, x)
        elif op == "band":
            acc = acc & x
        elif op == "bor":
            acc = acc | x
        elif op == "bxor":
            acc = acc ^ x
    if dtype == torch.bool:
        return acc.to(torch.bool)
    if op == "avg":
        if dtype.is_floating_point or dtype.is_complex:
            return (acc.to(torch.float64 if not dtype.is_complex else torch.complex128) / len(inputs)).to(dtype)
        return torch.div(acc, len(inputs), rounding_mode="trunc").to(dtype)
    return acc.to(dtype)


def ops_for(dtype):
    if dtype == torch.bool:
        return ["sum", "product", "min", "max", "band", "bor", "bxor"]
    if dtype.is_floating_point:
        return ["sum", "product", "min", "max", "avg"]
    return ["sum", "product", "min", "max", "avg", "band", "bor", "bxor"]


def check(got, want, what):
    if not torch.equal(got, want):
        bad = (got != want).nonzero()
        first = bad[0].tolist() if len(bad) else "?"
        raise AssertionError(f"{what}: {len(bad)} elements differ, first at {first}: got "
                             f"{got.flatten()[:8].tolist()}..., want {want.flatten()[:8].tolist()}...")


# ---- bodies (run on every rank) ----

def reductions(rank, world):
    import torch.distributed as dist

    for dtype in FLOATS + INTS + [torch.bool]:
        for op in ops_for(dtype):
            for n in COUNTS:
                inputs = [value(r, n, dtype, op) for r in range(world)]
                want = reference(inputs, op, dtype)
                what = f"{op} {dtype} n={n}"
                # all_reduce, in place, sync and async
                t = inputs[rank].clone()
                dist.all_reduce(t, op=reduce_op(op))
                check(t, want, "all_reduce " + what)
                t = inputs[rank].clone()
                w = dist.all_reduce(t, op=reduce_op(op), async_op=True)
                w.wait()
                check(w.get_future().value()[0], want, "all_reduce async (future) " + what)
                if n != COUNTS[-1]:
                    # reduce to a rotating root: the root gets the result, the others keep their input
                    root = (n + len(op)) % world
                    t = inputs[rank].clone()
                    dist.reduce(t, dst=root, op=reduce_op(op))
                    if rank == root:
                        check(t, want, f"reduce to {root} " + what)
                    # reduce_scatter_tensor: every block of this rank's input is its input, so every
                    # rank's output block is the reduction
                    blocks = torch.cat([inputs[rank]] * world)
                    out = torch.empty(n, dtype=dtype)
                    dist.reduce_scatter_tensor(out, blocks, op=reduce_op(op))
                    check(out, want, "reduce_scatter_tensor " + what)
                    # reduce_scatter (list of inputs)
                    out = torch.empty(n, dtype=dtype)
                    dist.reduce_scatter(out, list(blocks.chunk(world)), op=reduce_op(op))
                    check(out, want, "reduce_scatter " + what)


def factor_of(rank, dtype):
    """Each rank its own PREMUL_SUM factor, so scaling the result once (or by one rank's factor) fails."""
    return 0.5 * (rank + 1) if dtype.is_floating_point else float(rank + 2)


def premul(rank, world):
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _coalescing_manager

    for dtype in FLOATS + [torch.int32, torch.int64]:
        for n in (1, 1023, 65539):
            x = value(rank, n, dtype)
            want = sum(value(r, n, dtype).to(torch.float64) * factor_of(r, dtype) for r in range(world)).to(dtype)
            f = factor_of(rank, dtype)
            for make in (lambda: dist._make_nccl_premul_sum(f),
                         lambda: dist._make_nccl_premul_sum(torch.tensor([f], dtype=torch.float64))):
                what = f"premul_sum {dtype} n={n}"
                t = x.clone()
                dist.all_reduce(t, op=make())
                check(t, want, "all_reduce " + what)
                t = x.clone()
                work = dist.all_reduce(t, op=make(), async_op=True)
                work.wait()
                check(t, want, "all_reduce async " + what)
                t = x.clone()
                dist.reduce(t, dst=world - 1, op=make())
                if rank == world - 1:
                    check(t, want, "reduce " + what)
                out = torch.empty(n, dtype=dtype)
                dist.reduce_scatter_tensor(out, torch.cat([x] * world), op=make())
                check(out, want, "reduce_scatter_tensor " + what)
            if n == 1023:  # uneven reduce_scatter: block q has q + 1 elements
                ins = [x[:q + 1].clone() for q in range(world)]
                out = torch.empty(rank + 1, dtype=dtype)
                dist.reduce_scatter(out, ins, op=dist._make_nccl_premul_sum(f))
                check(out, want[:rank + 1], f"reduce_scatter uneven premul_sum {dtype}")
                ts = [x.clone(), x[:7].clone()]
                with _coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
                    for t in ts:
                        dist.all_reduce(t, op=dist._make_nccl_premul_sum(f))
                cm.wait()
                check(ts[0], want, f"coalesced premul_sum {dtype}")
                check(ts[1], want[:7], f"coalesced premul_sum {dtype} (short)")
    # complex: viewed as pairs of reals for sum and avg
    for n in (5, 4099):
        z = torch.complex(value(rank, n, torch.float32), value(rank + 1, n, torch.float32))
        zs = [torch.complex(value(r, n, torch.float32), value(r + 1, n, torch.float32)) for r in range(world)]
        t = z.clone()
        dist.all_reduce(t)
        check(t, sum(zs[1:], zs[0]), f"all_reduce complex64 n={n}")
        t = z.clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        # each component divided on its own (torch's complex division rounds differently)
        check(t, torch.view_as_complex(torch.view_as_real(sum(zs[1:], zs[0])) / world), f"all_reduce avg complex64 n={n}")


def movement(rank, world):
    import torch.distributed as dist

    for dtype in FLOATS + INTS + [torch.bool, torch.int16, torch.complex64]:
        for n in (1, 7, 1023, 65539):
            mine = value(rank, n, torch.int64).to(dtype) if dtype != torch.complex64 else \
                torch.complex(value(rank, n, torch.float32), value(rank, n, torch.float32) * 2)
            all_in = [value(r, n, torch.int64).to(dtype) if dtype != torch.complex64 else
                      torch.complex(value(r, n, torch.float32), value(r, n, torch.float32) * 2) for r in range(world)]
            what = f"{dtype} n={n}"
            for root in range(world):
                t = mine.clone()
                dist.broadcast(t, src=root)
                check(t, all_in[root], f"broadcast from {root} " + what)
            outs = [torch.empty_like(mine) for _ in range(world)]
            dist.all_gather(outs, mine)
            for r in range(world):
                check(outs[r], all_in[r], f"all_gather[{r}] " + what)
            flat = torch.empty(world * n, dtype=dtype)
            dist.all_gather_into_tensor(flat, mine)
            check(flat, torch.cat(all_in), "all_gather_into_tensor " + what)
            inplace = torch.zeros(world * n, dtype=dtype)
            inplace[rank * n:(rank + 1) * n] = mine
            dist.all_gather_into_tensor(inplace, inplace[rank * n:(rank + 1) * n])
            check(inplace, torch.cat(all_in), "all_gather_into_tensor in place " + what)
            if n > 1023:
                continue
            root = n % world
            gathered = [torch.empty_like(mine) for _ in range(world)] if rank == root else None
            dist.gather(mine, gathered, dst=root)
            if rank == root:
                for r in range(world):
                    check(gathered[r], all_in[r], f"gather[{r}] to {root} " + what)
            out = torch.empty_like(mine)
            dist.scatter(out, [x.clone() for x in all_in] if rank == root else None, src=root)
            check(out, all_in[rank], f"scatter from {root} " + what)
            # all_to_all (list) and all_to_all_single, equal blocks: block j of rank i = f(i, j)
            send = [(value(rank * world + j, n, torch.int64)).to(dtype) if dtype != torch.complex64 else
                    torch.complex(value(rank * world + j, n, torch.float32), value(j, n, torch.float32))
                    for j in range(world)]
            want = [(value(i * world + rank, n, torch.int64)).to(dtype) if dtype != torch.complex64 else
                    torch.complex(value(i * world + rank, n, torch.float32), value(rank, n, torch.float32))
                    for i in range(world)]
            recv = [torch.empty_like(mine) for _ in range(world)]
            dist.all_to_all(recv, send)
            for i in range(world):
                check(recv[i], want[i], f"all_to_all[{i}] " + what)
            single = torch.empty(world * n, dtype=dtype)
            dist.all_to_all_single(single, torch.cat(send))
            check(single, torch.cat(want), "all_to_all_single " + what)


def uneven(rank, world):
    import torch.distributed as dist

    def rows(i, j):  # rows rank i sends to rank j (zeros included)
        return (i * 3 + j * 2) % 4

    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        width = 5
        # all_to_all_single with split sizes, on 2-D tensors
        send = torch.cat([torch.full((rows(rank, j), width), rank * 100 + j, dtype=dtype) for j in range(world)])
        want = torch.cat([torch.full((rows(i, rank), width), i * 100 + rank, dtype=dtype) for i in range(world)])
        out = torch.empty_like(want)
        dist.all_to_all_single(out, send, output_split_sizes=[rows(i, rank) for i in range(world)],
                               input_split_sizes=[rows(rank, j) for j in range(world)])
        check(out, want, f"all_to_all_single uneven {dtype}")
        # all_to_all with tensors of different sizes
        sendl = [torch.full((rows(rank, j) + 1,), rank * 10 + j, dtype=dtype) for j in range(world)]
        recvl = [torch.empty(rows(i, rank) + 1, dtype=dtype) for i in range(world)]
        dist.all_to_all(recvl, sendl)
        for i in range(world):
            check(recvl[i], torch.full((rows(i, rank) + 1,), i * 10 + rank, dtype=dtype), f"all_to_all uneven [{i}]")
        # all_gather with different sizes per rank
        mine = torch.full((rank + 2,), rank + 1, dtype=dtype)
        outs = [torch.empty(r + 2, dtype=dtype) for r in range(world)]
        dist.all_gather(outs, mine)
        for r in range(world):
            check(outs[r], torch.full((r + 2,), r + 1, dtype=dtype), f"all_gather uneven [{r}]")
        # reduce_scatter with different block sizes
        ins = [torch.full((q + 1,), rank + q, dtype=dtype) for q in range(world)]
        out = torch.empty(rank + 1, dtype=dtype)
        dist.reduce_scatter(out, ins)
        check(out, torch.full((rank + 1,), sum(r + rank for r in range(world)), dtype=dtype), "reduce_scatter uneven")


def point_to_point(rank, world):
    import torch.distributed as dist

    for n in (1, 4099, 1 << 20):
        # blocking ring exchange done deadlock-free (even ranks send first), then isend/irecv and a batch
        right, left = (rank + 1) % world, (rank - 1) % world
        mine = torch.full((n,), float(rank))
        got = torch.empty(n)
        if rank % 2 == 0:
            dist.send(mine, right)
            dist.recv(got, left)
        else:
            dist.recv(got, left)
            dist.send(mine, right)
        check(got, torch.full((n,), float(left)), f"send/recv n={n}")
        got = torch.empty(n)
        reqs = [dist.isend(mine, right), dist.irecv(got, left)]
        for r in reqs:
            r.wait()
        check(got, torch.full((n,), float(left)), f"isend/irecv n={n}")
        got = torch.empty(n)
        ops = [dist.P2POp(dist.isend, mine, right), dist.P2POp(dist.irecv, got, left)]
        for r in dist.batch_isend_irecv(ops):
            r.wait()
        check(got, torch.full((n,), float(left)), f"batch_isend_irecv n={n}")
    # Stage to stage, as pipeline parallelism does: only ranks 0 and 1 take part, twice, then a collective
    # of all (a send/recv the others do not make must not put them a call behind).
    for _ in range(2):
        if rank == 0:
            dist.send(torch.full((5000,), 3.0), 1)
        elif rank == 1:
            got = torch.empty(5000)
            dist.recv(got, 0)
            check(got, torch.full((5000,), 3.0), "send/recv between ranks 0 and 1 only")
    t = torch.ones(10)
    dist.all_reduce(t)
    check(t, torch.full((10,), float(world)), "all_reduce after a send/recv of ranks 0 and 1 only")
    dist.barrier()
    w = dist.barrier(async_op=True)
    w.wait()
    # coalesced all-reduces through torch's coalescing manager
    from torch.distributed.distributed_c10d import _coalescing_manager

    ts = [torch.full((k + 3,), float(rank)) for k in range(4)]
    with _coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for t in ts:
        check(t, torch.full_like(t, float(sum(range(world)))), "coalesced all_reduce")
    # deprecated coalesced forms still in use
    outs = [[torch.empty(2), torch.empty(3, 2)] for _ in range(world)]
    dist.all_gather_coalesced(outs, [torch.full((2,), float(rank)), torch.full((3, 2), rank + 0.5)])
    for r in range(world):
        check(outs[r][0], torch.full((2,), float(r)), "all_gather_coalesced [0]")
        check(outs[r][1], torch.full((3, 2), r + 0.5), "all_gather_coalesced [1]")
    assert dist.get_backend() == "conflux"


def callbacks(rank, world):
    """A future's callback may make calls on the same group and wait for them (PowerSGD's hooks do)."""
    import torch.distributed as dist

    t, u = torch.ones(1000), torch.ones(1000)

    def then(fut):
        dist.all_reduce(u, async_op=True).get_future().wait()  # an async call, waited inside the callback
        dist.all_reduce(u)  # and a synchronous one
        return fut.value()

    fut = dist.all_reduce(t, async_op=True).get_future().then(then)
    fut.wait()
    check(t, torch.full((1000,), float(world)), "the call whose future had the callback")
    check(u, torch.full((1000,), float(world * world)), "the calls made in the callback")


def late_receives(rank, world):
    """isend/irecv exchanges between two ranks, repeated, with the irecv posted a while after the isend."""
    import time

    import torch.distributed as dist

    peer = rank ^ 1
    if peer >= world:
        return
    for delay in (0.0, 0.0, 0.05, 0.0):
        x = torch.full((1 << 24,), float(rank))  # 64 MiB: far more than any channel buffers
        y = torch.empty(1 << 24)
        s = dist.isend(x, peer)
        if delay:
            time.sleep(delay)
        r = dist.irecv(y, peer)
        s.wait()
        r.wait()
        check(y[:4], torch.full((4,), float(peer)), f"exchange with the receive {delay} s late")


def dropped_inputs(rank, world):
    """Asynchronous calls whose input tensors the caller drops at once (FSDP2 all-gathers a padded
    temporary): the backend holds them until the call has run. The calls are still queued behind a
    blocked all-reduce when their inputs go and the freed memory is filled with garbage."""
    import time

    import torch.distributed as dist

    if rank == 0:
        blocker = dist.all_reduce(torch.ones(4), async_op=True)  # waits for the late ranks
    else:
        time.sleep(0.5)
        blocker = dist.all_reduce(torch.ones(4), async_op=True)
    works, expected = [], []
    for n in (1000, 1 << 21):  # heap memory, reused at once; and an mmap'd block, unmapped at once
        out = torch.empty(n * world)
        works.append(dist.all_gather_into_tensor(out, torch.full((n,), rank + 1.0), async_op=True))
        expected.append((out, torch.arange(1.0, world + 1).repeat_interleave(n), f"all_gather_into_tensor of {n}"))
        out = torch.empty(n)
        works.append(dist.reduce_scatter_tensor(out, torch.full((n * world,), rank + 1.0), async_op=True))
        expected.append((out, torch.full((n,), world * (world + 1) / 2), f"reduce_scatter_tensor of {n}"))
        out = torch.empty(n * world)
        works.append(dist.all_to_all_single(out, torch.full((n * world,), rank + 1.0), async_op=True))
        expected.append((out, torch.arange(1.0, world + 1).repeat_interleave(n), f"all_to_all_single of {n}"))
    for n in (1000, 1 << 21):  # last: the ranks beyond 1 make no sends and receives
        if rank < 2:
            out = torch.empty(n)
            works.append(dist.isend(torch.full((n,), rank + 1.0), 1 - rank))
            works.append(dist.irecv(out, 1 - rank))
            expected.append((out, torch.full((n,), 2.0 - rank), f"isend/irecv of {n}"))
    garbage = [torch.full((n * world,), -7.0) for n in (1000, 1 << 21) for _ in range(4)]  # where the inputs were
    blocker.wait()
    for w in works:
        w.wait()
    del garbage
    for got, want, what in expected:
        check(got, want, what + " with the input dropped")


def packed_in_queue_order(rank, world):
    """Calls that pack their inputs into a temporary (reduce_scatter from separate tensors,
    all_gather_coalesced, in-place all_to_all_single) pack them after the calls queued before them have
    written them: here every input is first all-reduced asynchronously, and rank 0 queues everything
    while the others are still asleep."""
    import time

    import torch.distributed as dist

    if rank != 0:
        time.sleep(0.5)
    n = 1000
    works = []
    xs = [torch.ones(n) for _ in range(world)]
    works += [dist.all_reduce(x, async_op=True) for x in xs]  # each becomes world
    scattered = torch.empty(n)
    works.append(dist.reduce_scatter(scattered, xs, async_op=True))
    a = torch.ones(n * world)
    works.append(dist.all_reduce(a, async_op=True))
    works.append(dist.all_to_all_single(a, a, async_op=True))  # in place
    g = torch.ones(3)
    works.append(dist.all_reduce(g, async_op=True))
    gathered = [[torch.empty(3)] for _ in range(world)]
    works.append(dist.all_gather_coalesced(gathered, [g], async_op=True))
    for w in works:
        w.wait()
    check(scattered, torch.full((n,), float(world * world)), "reduce_scatter of inputs written by queued calls")
    check(a, torch.full((n * world,), float(world)), "in-place all_to_all_single after a queued all_reduce")
    for r in range(world):
        check(gathered[r][0], torch.full((3,), float(world)), "all_gather_coalesced after a queued all_reduce")


def errors(rank, world):
    import torch.distributed as dist

    t = torch.ones(4)
    cases = [
        (lambda: dist.all_reduce(torch.ones(4, dtype=torch.float32), op=dist.ReduceOp.BAND), "BAND"),
        (lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool), op=dist.ReduceOp.AVG), "bool"),
        (lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)), "int16"),
        (lambda: dist.all_reduce(torch.ones(4, 4).t()), "contiguous"),
        (lambda: dist.recv(t), "any source"),
        (lambda: dist.all_gather_into_tensor(torch.empty(3), t), "all_gather_into_tensor"),
    ]
    for fn, needle in cases:
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            assert needle in str(e), f"error for {needle!r} says: {e}"
        else:
            raise AssertionError(f"no error for {needle}")
    # The refused calls reached no rank: the group still works.
    dist.all_reduce(t)
    check(t, torch.full((4,), float(world)), "all_reduce after errors")


class Collectives(unittest.TestCase):
    def test_reductions(self):
        for world in (2, 3, 4):
            run_ranks(world, reductions)

    def test_premul_sum_and_complex(self):
        for world in (2, 3):
            run_ranks(world, premul)

    def test_data_movement(self):
        for world in (2, 3, 4):
            run_ranks(world, movement)

    def test_uneven_sizes(self):
        for world in (2, 3, 4):
            run_ranks(world, uneven)

    def test_point_to_point_barrier_and_coalescing(self):
        for world in (2, 3):
            run_ranks(world, point_to_point)

    def test_inputs_dropped_after_an_async_call(self):
        for world in (2, 3):
            run_ranks(world, dropped_inputs, timeout=120, timeout_s=60)

    def test_inputs_packed_in_queue_order(self):
        for world in (2, 3):
            run_ranks(world, packed_in_queue_order, timeout=120, timeout_s=60)

    def test_bad_arguments_raise_clear_errors(self):
        run_ranks(2, errors)

    def test_future_callbacks_may_call_the_group(self):
        run_ranks(2, callbacks, timeout=120, timeout_s=30)

    def test_isend_irecv_exchanges(self):
        run_ranks(2, late_receives, timeout=180, timeout_s=60)

    def test_premul_sum_on_one_rank(self):
        run_ranks(1, premul)


if __name__ == "__main__":
    unittest.main(verbosity=2)
