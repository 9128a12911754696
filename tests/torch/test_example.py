#!/usr/bin/python3
"""test_example.py - examples/torch_ddp.py runs as its docstring says, under npu-launch on 1, 2
and 4 devices, and learns (accuracy well above chance)."""
import os
import re
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.path.join(ROOT, "build", "bin")


class TestExample(unittest.TestCase):
    def test_torch_ddp_example(self):
        env = dict(os.environ, PYTHONPATH=os.environ.get("TORCH_HCCL_PYTHONPATH", ""))
        for devs in ("0", "0,1", "0,1,2,3"):
            with self.subTest(devices=devs):
                p = subprocess.run([os.path.join(BIN, "npu-launch"), "--device-list", devs, "--",
                                    sys.executable, os.path.join(ROOT, "examples", "torch_ddp.py"),
                                    "--epochs", "2"], env=env, timeout=240, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                self.assertEqual(p.returncode, 0, p.stdout)
                self.assertIn("training on %d devices" % len(devs.split(",")), p.stdout)
                acc = [float(a) for a in re.findall(r"accuracy ([0-9.]+)", p.stdout)]
                self.assertEqual(len(acc), 2, p.stdout)
                self.assertGreater(acc[-1], 0.6, p.stdout)  # 4 classes: chance is 0.25


if __name__ == "__main__":
    unittest.main(verbosity=2)
