"""CUDA tensors through the conflux backend (skipped, with the reason, where torch sees no GPU): results of
all_reduce, all_gather_into_tensor, reduce_scatter_tensor and a premultiplied sum against references; stream
semantics as ProcessGroupNCCL has them (a call is ordered on the caller's current stream and returns without
waiting for the GPU; an async work's wait() makes the waiting stream wait); two DDP steps matching NCCL (or
gloo where NCCL is missing). Ranks share GPUs round robin (two processes on one GPU: run under MPS).

Run: python tests/torch/test_cuda.py
"""

import os
import sys
import time
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import assert_same_training, run_ranks  # noqa: E402

HAVE_GPU = torch.cuda.is_available()
WHY = "no CUDA device: torch.cuda.is_available() is False"


def device_of(rank):
    return torch.device("cuda", rank % torch.cuda.device_count())


def results_body(rank, world):
    import torch.distributed as dist

    dev = device_of(rank)
    torch.cuda.set_device(dev)
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int32):
        for n in (7, 4099, 1 << 20):
            x = (torch.arange(n, device=dev) % 7 + rank).to(dtype)
            want = sum((torch.arange(n) % 7 + r).to(torch.float64) for r in range(world)).to(dtype)
            t = x.clone()
            dist.all_reduce(t)
            torch.testing.assert_close(t.cpu(), want, rtol=0, atol=0)
            g = torch.empty(world * n, dtype=dtype, device=dev)
            dist.all_gather_into_tensor(g, x)
            torch.testing.assert_close(g.cpu(), torch.cat([(torch.arange(n) % 7 + r).to(dtype) for r in range(world)]))
            out = torch.empty(n, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(out, torch.cat([x] * world))
            torch.testing.assert_close(out.cpu(), want, rtol=0, atol=0)
    t = torch.full((4099,), 2.0, device=dev)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(torch.tensor([0.5], device=dev)))
    torch.testing.assert_close(t.cpu(), torch.full((4099,), float(world)))


def stream_body(rank, world):
    import torch.distributed as dist

    dev = device_of(rank)
    torch.cuda.set_device(dev)
    side, other = torch.cuda.Stream(), torch.cuda.Stream()
    t = torch.ones(1 << 20, device=dev)
    dist.all_reduce(t)  # warm up (IPC workspaces, plans)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        t.fill_(1.0)
        torch.cuda._sleep(int(2e9))  # about a second of GPU time ahead of the collective on this stream
        t0 = time.monotonic()
        work = dist.all_reduce(t, async_op=True)
        issued = time.monotonic() - t0
    if issued > 0.5:
        raise AssertionError(f"all_reduce waited {issued:.2f} s on the host for the stream")
    with torch.cuda.stream(other):
        work.wait()  # the other stream waits for the collective, the host does not
        copy = t * 1  # ordered after the collective on `other`
    torch.cuda.synchronize()
    torch.testing.assert_close(copy.cpu(), torch.full((1 << 20,), float(world)))


def ddp_body(rank, world, out_dir):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    dev = device_of(rank)
    torch.cuda.set_device(dev)
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(dev),
                device_ids=[dev.index])
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(2):
        g = torch.Generator().manual_seed(rank * 10 + step)
        x = torch.randn(8, 16, generator=g).to(dev)
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    torch.save({k: v.cpu() for k, v in model.module.state_dict().items()},
               os.path.join(out_dir, f"{dist.get_backend()}_{rank}.pt"))


@unittest.skipUnless(HAVE_GPU, WHY)
class Cuda(unittest.TestCase):
    def test_results(self):
        run_ranks(2, results_body)

    def test_stream_semantics(self):
        run_ranks(2, stream_body)

    def test_ddp_matches(self):
        import torch.distributed as dist

        assert_same_training(2, ddp_body, baseline="nccl" if dist.is_nccl_available() else "gloo")


if __name__ == "__main__":
    unittest.main(verbosity=2)
