#!/usr/bin/env python3
"""test_deepspeed_zero.py - DeepSpeed ZeRO stages 1, 2 and 3 (float32, Adam) train on hccl as
on gloo, at 2 ranks: tests/torch/clients/deepspeed_zero.py, which calls
deepspeed.init_distributed(dist_backend=...) and trains the three stages in turn, run under
npu-launch on gloo and on hccl, and under DeepSpeed's own launcher (`deepspeed --num_gpus 2`)
on hccl, from the same seed and data. The two hccl runs are docs/pytorch.md's two commands,
as written there (their blocks are run here, not by the docs test).

For each stage, each hccl run must: learn (the last of STEPS losses below LEARNED of the
first); give gloo's loss at every step to LOSS_BOUND; end
with the same parameters on every rank (sha256 of the whole float32 model, ZeRO-3's gathered)
and within PARAM_BOUND of gloo's.

LOSS_BOUND = PARAM_BOUND = 1e-5, for the reason test_hf_trainer.py gives (float32 at 2 ranks:
each sum is of two numbers, so both libraries must agree to the bit, and have).

Skips, saying why, when no Python with this torch imports deepspeed (recipes_harness.py says
where it looks), as on Debian's torch 1.13. DeepSpeed builds its shared-memory op the first
time it starts on a CPU (minutes): setUpClass builds it first, outside the runs, in the process
that finds the Python with deepspeed (recipes_harness.deepspeed_python).
"""
import os
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recipes_harness as R  # noqa: E402

LOSS_BOUND = PARAM_BOUND = 1e-5
STEPS = 10
LEARNED = 0.95  # 10 Adam steps take the loss from 4.32 to 4.01 (0.93 of it); more cost time
RUN_CAP = 240  # seconds, each run
DOC_KEYS = {"npu-launch": "tests/torch/test_deepspeed_zero.py#npu-launch",
            "deepspeed": "tests/torch/test_deepspeed_zero.py#deepspeed"}


class TestDeepSpeedZero(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.py, why = R.deepspeed_python()  # and DeepSpeed's op built, outside the runs
        if cls.py is None:
            raise unittest.SkipTest(why)
        cls.dir = tempfile.mkdtemp(prefix="torch_hccl_zero_")
        out = os.path.join(cls.dir, "gloo.json")
        cls.gloo, _, cls.gloo_s = R.launch(cls.py, "deepspeed_zero.py", "gloo", out,
                                           ("--steps", str(STEPS)), cap=RUN_CAP)
        cls.gloo_out = out

    def check(self, launcher):
        # The hccl runs are docs/pytorch.md's two commands, as written there (its blocks are
        # run here, not by the docs test): --steps STEPS, the three stages.
        out = os.path.join(self.dir, "hccl_%s.json" % launcher)
        h, log, secs = R.launch_doc(self.py, "docs/pytorch.md", DOC_KEYS[launcher], out,
                                    cap=RUN_CAP)
        self.assertEqual(h["backend"], "hccl", log)
        self.assertEqual(h["world_size"], R.RANKS)
        self.assertEqual(h["launcher"], "deepspeed" if launcher == "deepspeed" else "other")
        self.assertEqual(sorted(h["stages"]), ["1", "2", "3"])
        for stage in ("1", "2", "3"):
            print(R.compare(self, "ZeRO-%s under %s" % (stage, launcher), h["stages"][stage],
                            self.gloo["stages"][stage],
                            torch.load("%s.stage%s.pt" % (out, stage)),
                            torch.load("%s.stage%s.pt" % (self.gloo_out, stage)),
                            LOSS_BOUND, PARAM_BOUND, learned=LEARNED))
        print("runs (three stages each): gloo %.0f s, hccl under %s %.0f s"
              % (self.gloo_s, launcher, secs))

    def test_zero_under_npu_launch_matches_gloo(self):
        self.check("npu-launch")

    def test_zero_under_deepspeed_launcher_matches_gloo(self):
        self.check("deepspeed")


if __name__ == "__main__":
    unittest.main(verbosity=2)
