"""A job for torchrun (tests/torch/test_init.py): init_process_group("conflux") with nothing imported but
torch, one all-reduce and one all-gather checked, and a report in $JOB_REPORT_DIR/rank<r> saying whether
conflux_torch was already loaded before the group was made (torch's import-time auto-loading) and whether
it is now."""

import os
import sys

import torch
import torch.distributed as dist

loaded_at_import = "conflux_torch" in sys.modules
dist.init_process_group("conflux")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.full((4099,), float(rank + 1))
dist.all_reduce(t)
assert t[4098].item() == world * (world + 1) / 2, t[4098].item()
outs = [torch.empty(2, dtype=torch.int64) for _ in range(world)]
dist.all_gather(outs, torch.full((2,), rank, dtype=torch.int64))
assert [o[0].item() for o in outs] == list(range(world))
assert dist.get_backend() == "conflux"
report = f"JOB OK rank {rank}/{world} loaded_at_import={loaded_at_import} loaded_now={'conflux_torch' in sys.modules}"
with open(os.path.join(os.environ["JOB_REPORT_DIR"], f"rank{rank}"), "w") as f:  # torchrun mixes stdout lines
    f.write(report)
dist.destroy_process_group()
