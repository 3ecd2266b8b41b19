"""Starting the conflux backend the ways users do: torchrun (env://) with only torch imported (the backend
comes through torch's entry points), with import-time auto-loading turned off (TORCH_DEVICE_BACKEND_AUTOLOAD=0:
the lazy entry point still finds it), tcp:// and file:// (mp.spawn style). The unique id travels through
torch's store with a fresh secret, so the launcher-derived secret and its warning never appear.

Run: python tests/torch/test_init.py
"""

import os
import socket
import subprocess
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import run_ranks  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DERIVED_SECRET_WARNING = "derived from job identifiers"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(nproc, env_extra, report_dir):
    env = dict(os.environ, JOB_REPORT_DIR=report_dir, **env_extra)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           os.path.join(HERE, "torchrun_job.py")]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    return p.returncode, p.stdout + p.stderr


def tcp_body(rank, world, port):
    import torch.distributed as dist

    dist.init_process_group("conflux", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    t = torch.ones(10)
    dist.all_reduce(t)
    assert t[0].item() == world


def file_body(rank, world):
    import torch.distributed as dist

    assert dist.get_backend() == "conflux"
    t = torch.ones(10)
    dist.all_reduce(t)
    assert t[0].item() == world


class Init(unittest.TestCase):
    def check_job(self, nproc, env, loaded_at_import):
        with tempfile.TemporaryDirectory() as reports:
            rc, out = torchrun(nproc, env, reports)
            self.assertEqual(rc, 0, out)
            for r in range(nproc):
                with open(os.path.join(reports, f"rank{r}")) as f:
                    self.assertEqual(f.read(), f"JOB OK rank {r}/{nproc} loaded_at_import={loaded_at_import} "
                                               "loaded_now=True", out)
        self.assertNotIn(DERIVED_SECRET_WARNING, out)

    def test_torchrun_without_importing_the_backend(self):
        self.check_job(3, {}, True)

    def test_torchrun_with_import_time_autoload_off(self):
        self.check_job(2, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, False)

    def test_tcp_init_method(self):
        run_ranks(2, tcp_body, free_port(), init=None)

    def test_file_init_method(self):
        run_ranks(3, file_body)


if __name__ == "__main__":
    unittest.main(verbosity=2)
