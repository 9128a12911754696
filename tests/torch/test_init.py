#!/usr/bin/python3
"""test_init.py - how a torch_hccl job starts: env://, tcp:// and file:// init, under
npu-launch and under a plain shell loop; several communicators per process (the default group
and new_group subgroups of any size, which give gloo's results at 3 ranks and as
new_group([0, 1, 2]) of 4; under HCCL_TOPO_FILE=ascend910 they follow HCCL's 1/2/4/8-per-server
rule and are refused on every member otherwise); the groups of a 3D layout split from the default group's communicator (or
over the store when any rank sets TORCH_HCCL_SPLIT=0, or for use_local_synchronization); a gloo
script run unchanged with backend hccl.
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
    import torch.distributed as dist
    rank, n = H.init()
    basic_checks(rank, n)
    dist.destroy_process_group()
    print("rank %d ok (%s init)" % (rank, os.environ.get("HCCL_TEST_INIT", "env")))


def basic_checks(rank, n):
    """basic_case's checks in the joined default group; destroys the subgroups it made."""
    import torch
    import torch.distributed as dist
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
        assert t.tolist() == [len(halves[mine])] * 5, (rank, t)
        t = torch.tensor([rank], dtype=torch.int64)
        dist.broadcast(t, src=halves[mine][-1], group=hg[mine])  # src is a global rank
        assert t.item() == halves[mine][-1]
        groups += hg
    if n in (3, 4):
        like_gloo(rank, n)
    t = torch.full((2,), 1.0)
    dist.all_reduce(t)  # the default group still works beside the subgroups
    assert t.tolist() == [float(n)] * 2
    for g in groups:
        dist.destroy_process_group(g)


def like_gloo(rank, n):
    """Three ranks on one server, as gloo and NCCL take them: at n = 3 the default group, at
    n = 4 new_group([0, 1, 2]); the same calls on a gloo group of the same ranks must give the
    same values (integers, so every order of summing gives the same bits)."""
    import torch
    import torch.distributed as dist
    ranks = [0, 1, 2]
    hg = None if n == 3 else dist.new_group(ranks)  # every rank makes both groups
    gg = dist.new_group(ranks, backend="gloo")
    if rank not in ranks:
        assert hg == dist.GroupMember.NON_GROUP_MEMBER, hg
        return
    results = {}
    for name, g in (("hccl", hg), ("gloo", gg)):
        out = []
        x = (torch.arange(1001, dtype=torch.float32) * (rank + 1)) % 97 - 40
        dist.all_reduce(x, group=g)
        y = torch.arange(33, dtype=torch.int32) * (2 * rank - 1)
        dist.all_reduce(y, op=dist.ReduceOp.MAX, group=g)
        z = torch.arange(7, dtype=torch.int64) + rank
        dist.all_reduce(z, op=dist.ReduceOp.PRODUCT, group=g)
        got = [torch.zeros(5, dtype=torch.int64) for _ in ranks]
        dist.all_gather(got, torch.arange(5) + 100 * rank, group=g)
        b = torch.full((9,), float(rank))
        dist.broadcast(b, src=ranks[-1], group=g)
        r = torch.arange(11, dtype=torch.float32) * (rank + 1)
        dist.reduce(r, dst=ranks[1], group=g)
        out += [x, y, z] + got + [b] + ([r] if rank == ranks[1] else [])
        results[name] = [t.tolist() for t in out]
    assert results["hccl"] == results["gloo"], (rank, results)
    print("rank %d: %d ranks (%s) as gloo" % (rank, len(ranks),
                                              "world" if n == 3 else "new_group([0, 1, 2])"))
    if hg is not None:
        dist.destroy_process_group(hg)
    dist.destroy_process_group(gg)


def refused_subgroup_case():
    """4 ranks under HCCL_TOPO_FILE=ascend910: new_group([0, 1, 2]) puts 3 ranks on one
    server: each member raises with HCCL's rule and the way to a flat topology; the
    non-member's store barrier gives up at the group's timeout; then the default group still
    works."""
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
            assert "3 ranks on server" in msg and "ascend910 allows 1, 2, 4 or 8" in msg, msg
            assert "HCCL_TOPO_FILE=flat8" in msg, msg
        print("rank %d refused: %s" % (rank, msg.splitlines()[0]))
    t = torch.ones(2)
    dist.all_reduce(t)
    assert t.tolist() == [4.0, 4.0]
    dist.destroy_process_group()
    print("rank %d ok" % rank)


def layout_case():
    """The groups of a tensor x pipeline x data layout (TEST_LAYOUT "tp,pp,dp"; rank =
    (d * pp + p) * tp + t): every rank makes every group, in the same order; each group's
    communicator was made as TEST_MADE_BY says (split, or store), and its allreduce,
    allgather and broadcast give the members' values; a group this rank is not in is
    NON_GROUP_MEMBER. TEST_SPLIT_OFF names a rank that sets TORCH_HCCL_SPLIT=0 alone
    (every rank must then take the store). Then a use_local_synchronization group (torch 2.x)
    is made over the store, and the default group still works. TEST_BASIC_FIRST=1: basic_case's
    checks first, in the same default group (one start of n ranks for both)."""
    rank = int(os.environ["RANK"])
    if os.environ.get("TEST_SPLIT_OFF") == str(rank):
        os.environ["TORCH_HCCL_SPLIT"] = "0"
    import torch
    import torch.distributed as dist
    import torch_hccl
    rank, n = H.init()
    if os.environ.get("TEST_BASIC_FIRST") == "1":
        basic_checks(rank, n)
        print("rank %d ok (%s init)" % (rank, os.environ.get("HCCL_TEST_INIT", "env")))
    tp, pp, dp = (int(x) for x in os.environ["TEST_LAYOUT"].split(","))
    assert tp * pp * dp == n, (tp, pp, dp, n)
    coord = lambda r: (r % tp, r // tp % pp, r // (tp * pp))  # noqa: E731
    want = os.environ["TEST_MADE_BY"]
    dims = {"tp": 0, "pp": 1, "dp": 2}
    mine = {}
    for name, axis in dims.items():  # every group of every dimension, on every rank
        keys = sorted({tuple(c for i, c in enumerate(coord(r)) if i != axis) for r in range(n)})
        for key in keys:
            ranks = [r for r in range(n)
                     if tuple(c for i, c in enumerate(coord(r)) if i != axis) == key]
            g = dist.new_group(ranks)
            if rank in ranks:
                mine[name] = (g, ranks)
            else:
                assert g == dist.GroupMember.NON_GROUP_MEMBER, (rank, ranks, g)
    for name, (g, ranks) in mine.items():
        assert torch_hccl.made_by(g) == want, (name, torch_hccl.made_by(g), want)
        assert dist.get_world_size(g) == len(ranks) and dist.get_rank(g) == ranks.index(rank)
        t = torch.full((3,), float(rank + 1))
        dist.all_reduce(t, group=g)
        assert t.tolist() == [float(sum(r + 1 for r in ranks))] * 3, (name, t)
        out = [torch.zeros(2, dtype=torch.int64) for _ in ranks]
        dist.all_gather(out, torch.tensor([rank, 10 * rank]), group=g)
        assert [o.tolist() for o in out] == [[r, 10 * r] for r in ranks], (name, out)
        t = torch.tensor([rank], dtype=torch.int32)
        dist.broadcast(t, src=ranks[-1], group=g)
        assert t.item() == ranks[-1], (name, t)
    if torch.__version__ >= "2":
        evens = [r for r in range(n) if r % 2 == 0]
        g = dist.new_group(evens, use_local_synchronization=True)
        if rank in evens:
            assert torch_hccl.made_by(g) == "store"
            t = torch.ones(1)
            dist.all_reduce(t, group=g)
            assert t.item() == len(evens)
    t = torch.ones(2)
    dist.all_reduce(t)
    assert t.tolist() == [float(n)] * 2
    print("rank %d layout ok: %s" % (rank, " ".join(
        "%s=%s" % (k, torch_hccl.made_by(g)) for k, (g, _) in sorted(mine.items()))))
    for g, _ in mine.values():
        dist.destroy_process_group(g)
    dist.destroy_process_group()


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


CASES = {"basic": basic_case, "refused": refused_subgroup_case, "layout": layout_case,
         "gloo_script": gloo_script_case}


class TestInit(unittest.TestCase):
    def ok(self, res, n):
        self.assertEqual(res.codes, [0] * n, res.text())

    def test_tcp_file(self):
        # env:// at 1, 3 and 4 ranks is test_under_npu_launch's (the same basic case, joined
        # from the launcher's RANK/WORLD_SIZE/MASTER_*), at 8 test_layout_split's, at 2
        # test_plain_shell_loop's.
        for init in ("tcp", "file"):
            for n in (1, 2, 4):
                with self.subTest(init=init, n=n):
                    res = H.run_ranks(__file__, "basic", n, init=init, timeout=120)
                    self.ok(res, n)
                    self.assertIn("(%s init)" % init, res.outputs[0])

    def test_layout_split(self):
        """2x2x2 at 8 ranks through the split, after the basic case's checks at 8 ranks by
        env:// in the same group; 2x2x1 at 4 ranks with rank 2 alone setting
        TORCH_HCCL_SPLIT=0, so every rank makes every group over the store."""
        for layout, n, env in (("2,2,2", 8, {"TEST_MADE_BY": "split", "TEST_BASIC_FIRST": "1"}),
                               ("2,2,1", 4, {"TEST_MADE_BY": "store",
                                             "TEST_SPLIT_OFF": "2"})):
            with self.subTest(layout=layout):
                env = dict(env, TEST_LAYOUT=layout)
                res = H.run_ranks(__file__, "layout", n, env=env, timeout=180)
                self.ok(res, n)
                for r in range(n):
                    self.assertIn("rank %d layout ok" % r, res.outputs[r])
                    if env.get("TEST_BASIC_FIRST"):
                        self.assertIn("rank %d ok (env init)" % r, res.outputs[r])

    def test_refused_subgroup(self):
        res = H.run_ranks(__file__, "refused", 4, env={"HCCL_TOPO_FILE": "ascend910"},
                          timeout=120)
        self.ok(res, 4)
        for r in (0, 1, 2):
            self.assertIn("1, 2, 4 or 8", res.outputs[r])

    def test_under_npu_launch(self):
        env = dict(os.environ, PYTHONPATH=H.BUILD_PYTHON, HCCL_TEST_INIT="env")
        for devs in ("0", "0,1,2", "0,1,2,3"):  # 3: any count (basic_case's like_gloo)
            with self.subTest(devices=devs):
                # A free port, not npu-launch's default (29688), which another job may hold.
                p = subprocess.run([NPU_LAUNCH, "--master-port", str(H.free_port()),
                                    "--device-list", devs, "--", sys.executable, __file__,
                                    "--worker", "basic"], env=env, timeout=180,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                self.assertEqual(p.returncode, 0, p.stdout)
                self.assertEqual(p.stdout.count(" ok (env init)"), len(devs.split(",")), p.stdout)
                if devs != "0":  # 3 ranks as gloo, as a world and as new_group([0, 1, 2])
                    self.assertEqual(p.stdout.count(" as gloo"), 3, p.stdout)

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
