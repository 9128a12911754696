#!/usr/bin/python3
"""test_shrink.py - dist.shrink_group on torch_hccl (HcclCommShrink): examples/torch_shrink.py
with 4 ranks, rank 2 SIGKILLed in step 3; the other three catch the failed all_reduce, shrink,
and finish on the 3-rank group, in the same processes, within 10 s of the kill; their final
parameters equal an unbroken run's (float64, to 1e-12; the example's result does not depend on
the group's size). The unbroken run has 4 ranks: 3 from the start is refused on one server (1, 2,
4 or 8 ranks per server); only a shrink's survivors may be 3. Each process is started
with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), not by npu-launch:
npu-launch stops every rank when one fails (its --grace-period teardown), which is what a
shrink must not meet. Skipped on a torch without shrink_group (1.13).
"""
import json
import os
import re
import socket
import subprocess
import sys
import unittest

import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(ROOT, "examples", "torch_shrink.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(nranks, *args, timeout=60):
    """The example in nranks processes; [(exit code, output)] in rank order."""
    port = free_port()
    procs = []
    for r in range(nranks):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(nranks), LOCAL_RANK=str(r),
                   LOCAL_WORLD_SIZE=str(nranks), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                   OMP_NUM_THREADS="1",
                   PYTHONPATH=os.environ.get("TORCH_HCCL_PYTHONPATH", ""))
        procs.append(subprocess.Popen([sys.executable, EXAMPLE] + list(args), env=env, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        out.append((p.returncode, text))
    return out


def final(text):
    m = re.search(r"^final (.*)$", text, re.M)
    return json.loads(m.group(1)) if m else None


@unittest.skipUnless(hasattr(dist, "shrink_group"), "this torch has no dist.shrink_group")
class TestShrink(unittest.TestCase):
    def test_killed_rank_survivors_shrink(self):
        ref = run(4)
        for code, text in ref:
            self.assertEqual(code, 0, text)
        want = final(ref[0][1])
        got = run(4, "--kill-rank", "2", "--kill-step", "3")
        self.assertEqual(got[2][0], -9, "rank 2 should have died by SIGKILL:\n" + got[2][1])
        killed = float(re.search(r"killed at ([0-9.]+)", got[2][1]).group(1))
        for r in (0, 1, 3):
            code, text = got[r]
            print("rank %d:\n%s" % (r, text))
            self.assertEqual(code, 0, text)
            self.assertRegex(text, r"step 3 failed")
            self.assertRegex(text, r"shrunk: rank %d of 3" % (r if r < 2 else 2))
            params = final(text)
            self.assertEqual(len(params), len(want))
            for a, b in zip(params, want):
                self.assertAlmostEqual(a, b, delta=1e-12 * max(1.0, abs(b)))
            done = float(re.search(r"done at ([0-9.]+)", text).group(1))
            self.assertLess(done - killed, 10.0, "rank %d finished %.1f s after the kill" %
                            (r, done - killed))

    def test_bad_lists(self):
        """The checks before the backend (torch's) and the backend's own refusal."""
        code = ("import sys, torch.distributed as d, torch_hccl\n"
                "d.init_process_group('hccl')\n"
                "try:\n"
                "    d.shrink_group([d.get_rank()])\n"
                "except RuntimeError as e:\n"
                "    print('refused:', e)\n"
                "pg = d.shrink_group([1])\n"
                "print('left', pg.size())\n")
        port = free_port()
        procs = [subprocess.Popen([sys.executable, "-c", code], text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  env=dict(os.environ, RANK=str(r), WORLD_SIZE="2",
                                           MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                                           PYTHONPATH=os.environ.get("TORCH_HCCL_PYTHONPATH", "")))
                 for r in range(2)]
        outs = [p.communicate(timeout=60)[0] for p in procs]
        self.assertIn("refused:", outs[0])
        self.assertIn("left 1", outs[0], outs[0])


if __name__ == "__main__":
    unittest.main()
