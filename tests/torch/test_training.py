"""Training through the conflux backend matches the same training on gloo: DDP (plain, with
find_unused_parameters, and with comm hooks that use the work's future) and FSDP2 (fully_shard on a CPU
mesh) for a few steps, each rank's parameters compared within float tolerance afterwards.

Run: python tests/torch/test_training.py
"""

import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import assert_same_training  # noqa: E402

STEPS = 5


def make_model():
    torch.manual_seed(1234)
    return torch.nn.ModuleDict({
        "body": torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU()),
        "head": torch.nn.Linear(64, 10),
        "unused": torch.nn.Linear(64, 3),  # never in the loss when skip_unused
    })


def batch(rank, step):
    g = torch.Generator().manual_seed(rank * 1000 + step)
    return torch.randn(16, 32, generator=g), torch.randint(0, 10, (16,), generator=g)


class Net(torch.nn.Module):
    def __init__(self, skip_unused):
        super().__init__()
        self.m = make_model()
        self.skip_unused = skip_unused

    def forward(self, x):
        h = self.m["body"](x)
        out = self.m["head"](h)
        if not self.skip_unused:
            out = out + self.m["unused"](h).sum(dim=1, keepdim=True) * 0.01
        return out


def ddp_body(rank, world, out_dir, variant):
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    skip = variant == "unused"
    model = DDP(Net(skip), find_unused_parameters=skip, bucket_cap_mb=0.01)  # several buckets
    if variant == "allreduce_hook":
        model.register_comm_hook(dist.group.WORLD, default_hooks.allreduce_hook)
    elif variant == "fp16_hook":
        model.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(STEPS):
        x, y = batch(rank, step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    backend = dist.get_backend()
    torch.save({k: v.detach().clone() for k, v in model.module.state_dict().items()},
               os.path.join(out_dir, f"{backend}_{rank}.pt"))


def fsdp_body(rank, world, out_dir):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    model = Net(True)
    for layer in model.m["body"]:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for step in range(2):
        x, y = batch(rank, step)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    full = {k: v.full_tensor().detach().clone() for k, v in model.state_dict().items()}
    torch.save(full, os.path.join(out_dir, f"{dist.get_backend()}_{rank}.pt"))


class Training(unittest.TestCase):
    def run_both(self, world, body, *args, rtol=1e-5, atol=1e-6):
        # the conflux ranks also agree with each other exactly (DDP and FSDP2 keep replicas equal)
        assert_same_training(world, body, *args, rtol=rtol, atol=atol, replicas_equal=True)

    def test_ddp(self):
        self.run_both(3, ddp_body, "plain")

    def test_ddp_find_unused_parameters(self):
        self.run_both(2, ddp_body, "unused")

    def test_ddp_allreduce_comm_hook(self):
        self.run_both(2, ddp_body, "allreduce_hook")

    def test_ddp_fp16_compress_hook(self):
        self.run_both(2, ddp_body, "fp16_hook", rtol=1e-3, atol=1e-4)

    def test_fsdp2(self):
        # 3 ranks: every parameter's rows split unevenly, so FSDP2 pads shards and all-gathers temporaries
        self.run_both(3, fsdp_body)


if __name__ == "__main__":
    unittest.main(verbosity=2)
