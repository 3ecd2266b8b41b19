"""Process groups beyond the world through the conflux backend: new_group (fresh communicators met through
torch's store), split_group and new_group with a bound device (cfxCommCreateGroup of the parent's
communicator among the members; the ranks outside touch nothing), a CPU DeviceMesh and DTensor on it, concurrent calls
on several groups, and sequence numbers that agree across ranks.

Run: python tests/torch/test_groups.py
"""

import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import run_ranks  # noqa: E402


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def check_group(group, members, rank, what):
    """A collective on `group` (global ranks `members`, in group-rank order) gives what plain torch says."""
    import torch.distributed as dist

    if rank not in members:
        expect(group == dist.GroupMember.NON_GROUP_MEMBER or dist.get_rank(group) < 0, f"{what}: rank {rank} is in it")
        return
    expect(dist.get_rank(group) == members.index(rank), f"{what}: group rank {dist.get_rank(group)} for {rank}")
    expect(dist.get_world_size(group) == len(members), f"{what}: size")
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t, group=group)
    expect(t[0].item() == sum(m + 1 for m in members), f"{what}: all_reduce gave {t[0].item()}")
    outs = [torch.empty(3, dtype=torch.int64) for _ in members]
    dist.all_gather(outs, torch.full((3,), rank, dtype=torch.int64), group=group)
    expect([o[0].item() for o in outs] == members, f"{what}: all_gather order {[o[0].item() for o in outs]}")
    b = torch.full((5,), float(rank))
    dist.broadcast(b, src=members[-1], group=group)  # src is a global rank
    expect(b[0].item() == members[-1], f"{what}: broadcast")


def new_groups(rank, world):
    import torch.distributed as dist

    # Every rank calls every new_group, in the same order (torch's rule).
    a = dist.new_group([0, 2])
    b = dist.new_group([1, 3])
    c = dist.new_group([3, 1, 0])  # torch sorts new_group's ranks by default
    d = dist.new_group([2, 1, 0], use_local_synchronization=False)
    check_group(a, [0, 2], rank, "new_group [0, 2]")
    check_group(b, [1, 3], rank, "new_group [1, 3]")
    check_group(c, [0, 1, 3], rank, "new_group [3, 1, 0]")
    check_group(d, [0, 1, 2], rank, "new_group [2, 1, 0]")
    # Asynchronous calls on two groups at once, and on the world between them.
    mine = a if rank in (0, 2) else b
    works, ts = [], []
    for k in range(5):
        t = torch.full((4099,), float(k + rank))
        works.append(dist.all_reduce(t, group=mine, async_op=True))
        ts.append(t)
    w = torch.ones(10)
    dist.all_reduce(w)
    for k, (work, t) in enumerate(zip(works, ts)):
        work.wait()
        members = [0, 2] if rank in (0, 2) else [1, 3]
        expect(t[7].item() == sum(k + m for m in members), f"async on a subgroup, call {k}")
    expect(w[0].item() == world, "world all_reduce between subgroup calls")
    for g in (a, b, c, d):
        if g != dist.GroupMember.NON_GROUP_MEMBER:
            dist.destroy_process_group(g)
    t = torch.ones(3)
    dist.all_reduce(t)
    expect(t[0].item() == world, "the world after destroying subgroups")


def split_groups(rank, world):
    import torch.distributed as dist

    pg = dist.distributed_c10d._get_default_group()
    expect(pg._get_backend(torch.device("cpu")).supports_splitting, "conflux supports splitting")
    halves = dist.split_group(split_ranks=[[0, 1], [2, 3]])
    check_group(halves, [0, 1] if rank < 2 else [2, 3], rank, "split [[0,1],[2,3]]")
    # One group, in a given order; ranks 0 and 2 are outside.
    odd = dist.split_group(split_ranks=[[3, 1]])
    if rank in (1, 3):
        check_group(odd, [3, 1], rank, "split [[3,1]]")
    else:
        expect(odd == dist.GroupMember.NON_GROUP_MEMBER, "ranks outside a split get no group")
    # A split of a split.
    if rank < 2:
        inner = dist.split_group(parent_pg=halves, split_ranks=[[1], [0]])
        check_group(inner, [rank], rank, "split of a split")
    else:
        inner = dist.split_group(parent_pg=halves, split_ranks=[[0, 1]])
        check_group(inner, [2, 3], rank, "split of a split (whole)")
    seqs = torch.tensor([pg._get_backend(torch.device("cpu"))._get_sequence_number_for_group()], dtype=torch.int64)
    everyone = [torch.empty(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(everyone, seqs)
    expect(len({int(s.item()) for s in everyone}) == 1, f"sequence numbers differ: {[int(s) for s in everyone]}")


def bound_device_groups(rank, world):
    import torch.distributed as dist

    # With a bound device, torch builds new groups by splitting the default one; the ranks outside
    # the new group take part through perform_nocolor_split.
    g = dist.new_group([0, 3])
    check_group(g, [0, 3], rank, "new_group [0, 3] split from the default group")
    h = dist.new_group([1, 2, 3])
    check_group(h, [1, 2, 3], rank, "new_group [1, 2, 3] split from the default group")


def device_mesh(rank, world):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh.get_group("dp"), mesh.get_group("tp")
    row, col = rank // 2, rank % 2
    check_group(dp, [col, col + 2], rank, "mesh dim dp")
    check_group(tp, [2 * row, 2 * row + 1], rank, "mesh dim tp")
    torch.manual_seed(0)
    full = torch.randn(8, 6)
    d = distribute_tensor(full, mesh, [Shard(0), Shard(1)])
    expect(isinstance(d, DTensor), "a DTensor")
    expect(torch.equal(d.full_tensor(), full), "full_tensor of a 2-D sharded DTensor")
    r = d.redistribute(mesh, [Replicate(), Replicate()])
    expect(torch.equal(r.to_local(), full), "redistribute to replicated")
    s = (d * 2).sum()
    expect(torch.allclose(s.full_tensor(), full.sum() * 2), "a reduction over the sharded tensor")
    dist.barrier()


class Groups(unittest.TestCase):
    def test_new_group(self):
        run_ranks(4, new_groups)

    def test_split_group(self):
        run_ranks(4, split_groups)

    def test_new_group_with_a_bound_device_splits(self):
        run_ranks(4, bound_device_groups, device_id="cpu:0")

    def test_device_mesh_and_dtensor(self):
        run_ranks(4, device_mesh)


if __name__ == "__main__":
    unittest.main(verbosity=2)
