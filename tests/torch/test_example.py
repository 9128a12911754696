#!/usr/bin/python3
"""test_example.py - examples/torch_ddp.py runs as its docstring says, under npu-launch on 1, 2
and 4 devices, and learns (accuracy well above chance); after an injected failure under
npu-launch --max-restarts it resumes from its checkpoint to the same last epoch."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.path.join(ROOT, "build", "bin")
sys.path.insert(0, os.path.join(ROOT, "tests", "docs"))
import docblocks  # noqa: E402


def launch(devs, epochs):
    """examples/torch_ddp.py --epochs EPOCHS under npu-launch on DEVS: the finished process."""
    env = dict(os.environ, PYTHONPATH=os.environ.get("TORCH_HCCL_PYTHONPATH", ""))
    return subprocess.run([os.path.join(BIN, "npu-launch"), "--master-port",
                           str(docblocks.free_port()), "--device-list", devs, "--",
                           sys.executable, os.path.join(ROOT, "examples", "torch_ddp.py"),
                           "--epochs", str(epochs)], env=env, timeout=240, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


class TestExample(unittest.TestCase):
    two_devices = None  # the 2-device run of 3 epochs: both tests judge it (one launch)

    @classmethod
    def two_device_run(cls):
        if cls.two_devices is None:
            cls.two_devices = launch("0,1", 3)
        return cls.two_devices

    def test_torch_ddp_example(self):
        for devs, epochs in (("0", 2), ("0,1", 3), ("0,1,2,3", 2)):
            with self.subTest(devices=devs):
                p = self.two_device_run() if devs == "0,1" else launch(devs, epochs)
                self.assertEqual(p.returncode, 0, p.stdout)
                self.assertIn("training on %d devices" % len(devs.split(",")), p.stdout)
                acc = [float(a) for a in re.findall(r"accuracy ([0-9.]+)", p.stdout)]
                self.assertEqual(len(acc), epochs, p.stdout)
                self.assertGreater(acc[-1], 0.6, p.stdout)  # 4 classes: chance is 0.25


    def test_resume_after_failure(self):
        """Rank 1 exits at the start of epoch 3 under npu-launch --max-restarts 1: the group
        starts again, resumes from the epoch-2 checkpoint, and its epoch 3 is the one of a run
        that never stopped, to the printed digit."""
        ck = tempfile.mktemp(prefix="torch_ddp_ckpt_")
        runs = {}
        p = self.two_device_run()
        self.assertEqual(p.returncode, 0, p.stdout)
        runs["never stopped"] = p.stdout
        # The resumed run is docs/pytorch.md's command, as written there (its block is run here,
        # not by the docs test; docblocks.py), with this test's own checkpoint file for the
        # page's /tmp/ckpt.pt: npu-launch --max-restarts 1 --device-list 0,1 -- python3
        # examples/torch_ddp.py --epochs 3 --checkpoint FILE --fail-at-epoch 3
        body, args, samples = docblocks.block_by(ROOT, "docs/pytorch.md",
                                                 "tests/torch/test_example.py#resume")
        build = os.path.dirname(os.environ.get("TORCH_HCCL_PYTHONPATH", "")) or \
            os.path.join(ROOT, "build")
        runs["resumed"] = docblocks.run_block(
            ROOT, build, sys.executable, docblocks.with_free_port(body.replace("/tmp/ckpt.pt", ck)),
            args, samples, os.environ)
        try:
            os.remove(ck)
        except OSError:
            pass
        out = runs["resumed"]
        self.assertIn("rank 1 fails at epoch 3", out)
        self.assertIn("starting every rank again: restart 1 of 1", out)
        self.assertIn("resuming at epoch 3 from", out)
        last = [re.search(r"epoch 3: loss [0-9.]+ accuracy [0-9.]+", o) for o in runs.values()]
        self.assertTrue(all(last), runs)
        self.assertEqual(last[0].group(0), last[1].group(0), runs)


if __name__ == "__main__":
    unittest.main(verbosity=2)
