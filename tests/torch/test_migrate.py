#!/usr/bin/python3
"""test_migrate.py - examples/migrate_hccl.py, a typical NCCL DDP script after the edits
docs/pytorch.md's table lists ("Moving a CUDA script"), runs as it stands under npu-launch and
torchrun at 2 ranks: it learns, prints no warning about CUDA, pinned memory or a missing
accelerator, and torch_hccl.set_device gives the device its tensors live on. (That the doc's
diff is the diff of the two files is checked by tests/docs/test_docs.py.)"""
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.path.join(ROOT, "build", "bin")
SCRIPT = os.path.join(ROOT, "examples", "migrate_hccl.py")


def run(cmd, **env):
    e = dict(os.environ, PYTHONPATH=os.environ.get("TORCH_HCCL_PYTHONPATH", ""), **env)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        e.pop(k, None)
    return subprocess.run(cmd, env=e, timeout=300, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)


class TestMigrate(unittest.TestCase):
    def check_training(self, p):
        self.assertEqual(p.returncode, 0, p.stdout)
        loss = [float(x) for x in re.findall(r"epoch \d+: loss ([0-9.]+) over 8192 samples",
                                             p.stdout)]
        self.assertEqual(len(loss), 2, p.stdout)
        self.assertLess(loss[1], loss[0], p.stdout)
        # (DataLoader's advice on workers per CPU depends on the machine, not on the edits.)
        for noise in ("CUDA", "cuda", "pin_memory", "accelerator", "autocast", "GradScaler",
                      "Traceback"):
            self.assertNotIn(noise, p.stdout)

    def test_npu_launch(self):
        self.check_training(run([os.path.join(BIN, "npu-launch"), "--device-list", "0,1", "--",
                                 sys.executable, SCRIPT, "--epochs", "2"]))

    @unittest.skipIf(int(__import__("torch").__version__.split(".")[0]) < 2,
                     "Debian's torchrun (torch 1.13) fails on Python 3.11 in its own agent")
    def test_torchrun(self):
        self.check_training(run([sys.executable, "-m", "torch.distributed.run",
                                 "--nproc_per_node", "2", "--master_port", "29731",
                                 SCRIPT, "--epochs", "2"], OMP_NUM_THREADS="1"))

    def test_set_device_returns_where_tensors_live(self):
        p = run([sys.executable, "-c", "import torch_hccl; d = torch_hccl.set_device('npu:1'); "
                 "print(d, torch_hccl.current_device())"])
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertEqual(p.stdout.split(), ["cpu", "1"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
