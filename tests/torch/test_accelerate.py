#!/usr/bin/env python3
"""test_accelerate.py - a training loop written for Hugging Face Accelerate trains on hccl as
on gloo: tests/torch/clients/accelerate_loop.py (the group made first, then
Accelerator(cpu=True): docs/pytorch.md says why) at 2 ranks under npu-launch, once on gloo and
once on hccl, from the same seed and data. The hccl run is docs/pytorch.md's command, as
written there (its block is run here, not by the docs test).

The pair must: learn; give the same loss at every step (accelerator.reduce(loss, "mean")) to
LOSS_BOUND; count the same samples per rank (accelerator.gather); evaluate exactly the 301
samples (gather_for_metrics drops what the sampler repeats to even the last batch) to the same
accuracy; end with the same parameters on every hccl rank (sha256) and within PARAM_BOUND of
gloo's. LOSS_BOUND = PARAM_BOUND = 1e-5, for the reason test_hf_trainer.py gives.

Skips, saying why, when no Python with this torch imports accelerate (recipes_harness.py says
where it looks): Debian's torch 1.13 has none.
"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import recipes_harness as R  # noqa: E402

LOSS_BOUND = PARAM_BOUND = 1e-5


class TestAccelerate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.py, why = R.skip_reason_or_python(["accelerate"])
        if cls.py is None:
            raise unittest.SkipTest(why)

    def test_loop_matches_gloo(self):
        res = R.pair(self, self.py, tempfile.mkdtemp(prefix="torch_hccl_accelerate_"),
                     "accelerate_loop",
                     doc=("docs/pytorch.md", "tests/torch/test_accelerate.py#hccl"))
        (h, hp, hs), (g, gp, gs) = res["hccl"], res["gloo"]
        self.assertEqual(h["eval_samples"], 301, "gather_for_metrics kept the padding")
        self.assertEqual(h["samples_per_rank"], g["samples_per_rank"])
        self.assertEqual(sum(h["samples_per_rank"]), 2 * 1024)
        self.assertEqual(h["accuracy"], g["accuracy"])
        print(R.compare(self, "accelerate loop", h, g, hp, gp, LOSS_BOUND, PARAM_BOUND)
              + "; accuracy %.4f both; run gloo %.0f s, hccl %.0f s" % (h["accuracy"], gs, hs))


if __name__ == "__main__":
    unittest.main(verbosity=2)
