#!/usr/bin/python3
"""test_init.py - how a torch_hccl job starts: env://, tcp:// and file:// init, under
npu-launch and under a plain shell loop; several communicators per process (the default group
and new_group subgroups, which follow the 1/2/4/8-per-server rule and are refused on every
member otherwise); a gloo script run unchanged with backend hccl.
"""
import datetime
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_harness as H  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NPU_LAUNCH = os.environ.get("HCCL_BIN_DIR", os.path.join(ROOT, "build", "bin")) + "/npu-launch"


def basic_case():
    """Joins by HCCL_TEST_INIT, checks size and rank, allreduces, makes and uses two
    subgroups (halves, then pairs), destroys everything."""
    import torch
    import torch.distributed as dist
    rank, n = H.init()
    assert dist.get_backend() == "hccl", dist.get_backend()
    assert (dist.get_rank(), dist.get_world_size()) == (rank, n)
    t = torch.full((3,), float(rank + 1))
    dist.all_reduce(t)
    assert t.tolist() == [n * (n + 1) / 2] * 3, t
    groups = []
    if n >= 2:
        halves = [list(range(0, n // 2)), list(range(n // 2, n))]
        hg = [dist.new_group(h) for h in halves]  # every rank calls new_group for every group
        mine = 0 if rank < n // 2 else 1
        t = torch.ones(5, dtype=torch.int32)
        dist.all_reduce(t, group=hg[mine])
        assert t.tolist() == [n // 2] * 5, (rank, t)
        t = torch.tensor([rank], dtype=torch.int64)
        dist.broadcast(t, src=halves[mine][-1], group=hg[mine])  # src is a global rank
        assert t.item() == halves[mine][-1]
        groups += hg
    t = torch.full((2,), 1.0)
    dist.all_reduce(t)  # the default group still works beside the subgroups
    assert t.tolist() == [float(n)] * 2
    for g in groups:
        dist.destroy_process_group(g)
    dist.destroy_process_group()
    print("rank %d ok (%s init)" % (rank, os.environ.get("HCCL_TEST_INIT", "env")))


def refused_subgroup_case():
    """4 ranks: new_group([0, 1, 2]) puts 3 ranks on one server: each member raises with the
    rule; the non-member's store barrier gives up at the group's timeout; then the default
    group still works."""
    import torch
    import torch.distributed as dist
    rank, n = H.init()
    try:
        dist.new_group([0, 1, 2], timeout=datetime.timedelta(seconds=4))
        # torch 2.x does not hold a non-member in new_group's store barrier.
        if rank in (0, 1, 2) or torch.__version__ < "2":
            raise AssertionError("rank %d: a 3-rank group was not refused" % rank)
    except RuntimeError as e:
        msg = str(e)
        if rank in (0, 1, 2):
            assert "3 ranks on server" in msg and "1, 2, 4 or 8" in msg, msg
        print("rank %d refused: %s" % (rank, msg.splitlines()[0]))
    t = torch.ones(2)
    dist.all_reduce(t)
    assert t.tolist() == [4.0, 4.0]
    dist.destroy_process_group()
    print("rank %d ok" % rank)


def gloo_script_case():
    """A gloo script that runs unchanged on hccl: only the backend string and the import."""
    import torch
    import torch.distributed as dist
    import torch_hccl  # noqa: F401
    dist.init_process_group(backend=os.environ["BACKEND"])
    rank, world = dist.get_rank(), dist.get_world_size()
    x = torch.arange(4, dtype=torch.float32) + rank
    dist.all_reduce(x, op=dist.ReduceOp.SUM)
    gathered = [torch.zeros(4) for _ in range(world)]
    dist.all_gather(gathered, x)
    dist.barrier()
    print("rank %d result %s" % (rank, [round(v, 3) for v in torch.cat(gathered).tolist()]))
    dist.destroy_process_group()


CASES = {"basic": basic_case, "refused": refused_subgroup_case, "gloo_script": gloo_script_case}


class TestInit(unittest.TestCase):
    def ok(self, res, n):
        self.assertEqual(res.codes, [0] * n, res.text())

    def test_env_tcp_file(self):
        for init in ("env", "tcp", "file"):
            for n in (1, 2, 4):
                with self.subTest(init=init, n=n):
                    res = H.run_ranks(__file__, "basic", n, init=init, timeout=120)
                    self.ok(res, n)
                    self.assertIn("(%s init)" % init, res.outputs[0])

    def test_8_ranks_env(self):
        self.ok(H.run_ranks(__file__, "basic", 8, timeout=180), 8)

    def test_refused_subgroup(self):
        res = H.run_ranks(__file__, "refused", 4, timeout=120)
        self.ok(res, 4)
        for r in (0, 1, 2):
            self.assertIn("1, 2, 4 or 8", res.outputs[r])

    def test_under_npu_launch(self):
        env = dict(os.environ, PYTHONPATH=H.BUILD_PYTHON, HCCL_TEST_INIT="env")
        for devs in ("0", "0,1", "0,1,2,3"):
            with self.subTest(devices=devs):
                p = subprocess.run([NPU_LAUNCH, "--device-list", devs, "--", sys.executable,
                                    __file__, "--worker", "basic"], env=env, timeout=180,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                self.assertEqual(p.returncode, 0, p.stdout)
                self.assertEqual(p.stdout.count(" ok (env init)"), len(devs.split(",")), p.stdout)

    def test_plain_shell_loop(self):
        port = H.free_port()
        script = ('for r in 0 1; do RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=%d '
                  '"%s" "%s" --worker basic & done; wait' % (port, sys.executable, __file__))
        env = dict(os.environ, PYTHONPATH=H.BUILD_PYTHON, HCCL_TEST_INIT="env")
        p = subprocess.run(["bash", "-c", script], env=env, timeout=120, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.stdout.count(" ok (env init)"), 2, p.stdout)

    def test_gloo_script_unchanged(self):
        results = {}
        for backend in ("gloo", "hccl"):
            res = H.run_ranks(__file__, "gloo_script", 4, env={"BACKEND": backend}, timeout=120)
            self.ok(res, 4)
            results[backend] = [line for out in res.outputs for line in out.splitlines()
                                if line.startswith("rank ")]
        self.assertEqual(sorted(results["gloo"]), sorted(results["hccl"]))

    def test_module_built_for_another_torch(self):
        """A torch_hccl built for another torch is refused at import with an ImportError
        naming both torches and how to rebuild (loading its _C would abort the process)."""
        import shutil
        import tempfile
        src = os.path.join(os.environ.get("TORCH_HCCL_PYTHONPATH", ""), "torch_hccl")
        with tempfile.TemporaryDirectory() as d:
            shutil.copytree(src, os.path.join(d, "torch_hccl"))
            with open(os.path.join(d, "torch_hccl", "_build.py"), "w") as f:
                f.write('TORCH_VERSION = "0.0.1"\nPYTHON = "/opt/other/python3"\n')
            p = subprocess.run([sys.executable, "-c", "import torch_hccl"], text=True,
                               env=dict(os.environ, PYTHONPATH=d), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=120)
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn("ImportError: torch_hccl in", p.stdout)
        self.assertIn("was built for torch 0.0.1 (/opt/other/python3)", p.stdout)
        self.assertIn("-DHCCL_TORCH_PYTHON=" + sys.executable, p.stdout)


if __name__ == "__main__":
    H.worker_main(CASES)
    unittest.main(verbosity=2)
