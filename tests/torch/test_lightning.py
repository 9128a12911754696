#!/usr/bin/env python3
"""test_lightning.py - Lightning (code no one here wrote) trains on hccl as on gloo.

tests/torch/clients/lightning_train.py runs Trainer(accelerator="cpu", devices=4,
strategy=DDPStrategy(process_group_backend=...)) with synced logging, a torchmetrics metric,
EarlyStopping (whose stop decision every rank agrees on through an int64 allreduce) and
ModelCheckpoint, once on gloo and once on hccl, from the same seed. The two runs must stop at
the same epoch, keep the same best checkpoint, and end with the same metrics and parameters (to
float rounding: the two libraries may add a sum's terms in different orders).

Skipped, saying why, where the Python that has torch has no Lightning (Debian's torch 1.13):
`pip install lightning==2.6.6 torchmetrics==1.9.0` provides it.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_PYTHON = os.environ.get("TORCH_HCCL_PYTHONPATH", "")

try:
    import lightning  # noqa: F401
    import torchmetrics  # noqa: F401
    HAVE_LIGHTNING = True
except ImportError:
    HAVE_LIGHTNING = False


def run(backend, devices, out_dir):
    out = os.path.join(out_dir, backend + ".json")
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    if BUILD_PYTHON:
        env["PYTHONPATH"] = BUILD_PYTHON + os.pathsep + env.get("PYTHONPATH", "")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"):  # Lightning sets its own
        env.pop(k, None)
    p = subprocess.run([sys.executable, os.path.join(HERE, "clients", "lightning_train.py"),
                        "--backend", backend, "--devices", str(devices), "--out", out,
                        "--dir", os.path.join(out_dir, backend)],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=600, start_new_session=True)
    if p.returncode != 0:
        raise AssertionError("lightning on %s exited %d:\n%s" % (backend, p.returncode,
                                                                 p.stdout[-6000:]))
    with open(out) as f:
        return json.load(f), p.stdout


@unittest.skipUnless(HAVE_LIGHTNING, "no lightning/torchmetrics for %s" % sys.executable)
class TestLightning(unittest.TestCase):
    def test_ddp_strategy_matches_gloo(self):
        d = tempfile.mkdtemp(prefix="torch_hccl_lightning_")
        gloo, _ = run("gloo", 4, d)
        hccl, log = run("hccl", 4, d)
        print("gloo:", json.dumps(gloo, sort_keys=True))
        print("hccl:", json.dumps(hccl, sort_keys=True))
        self.assertEqual(hccl["backend"], "hccl", log)
        self.assertEqual(hccl["world_size"], 4)
        # EarlyStopping stopped the run before max_epochs, at the same epoch on both.
        self.assertGreater(gloo["stopped_epoch"], 0, gloo)
        self.assertEqual(hccl["stopped_epoch"], gloo["stopped_epoch"])
        self.assertEqual(hccl["epochs_run"], gloo["epochs_run"])
        self.assertEqual(hccl["best_model"], gloo["best_model"])
        self.assertAlmostEqual(hccl["best_score"], gloo["best_score"], places=5)
        self.assertEqual(sorted(hccl["metrics"]), sorted(gloo["metrics"]))
        for k, v in gloo["metrics"].items():
            self.assertAlmostEqual(hccl["metrics"][k], v, places=4, msg=k)
        for k in ("param_sum", "param_abs_sum"):
            self.assertAlmostEqual(hccl[k], gloo[k], delta=1e-3 * max(1.0, abs(gloo[k])), msg=k)


if __name__ == "__main__":
    unittest.main(verbosity=2)
