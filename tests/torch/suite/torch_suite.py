#!/usr/bin/env python3
"""torch_suite.py - PyTorch's own distributed suite (torch.testing._internal.distributed.
distributed_test, the tests behind torch's test/distributed/test_distributed_spawn.py) on a
backend, here hccl or gloo, in spawned processes as torch's CI runs it.

    python3 tests/torch/suite/torch_suite.py --backend hccl --world-size 2 [--gate gloo]
        [--json out.json] [-k PATTERN ...]

--gate NAME lifts the suite's backend-name gates: its decorators (`BACKEND != "gloo"` and the
like, read when the module is imported) see NAME, and so do the tests' own branches on the
name, while every process group is made with --backend. So `--backend hccl --gate gloo` runs
on hccl every test the suite runs for gloo, as it runs it for gloo.
Prints one line per test (`PASS`, `SKIP <reason>`, `FAIL`), the failures' tracebacks, and a
closing line `N passed, N failed, N skipped`; --json writes {test: [status, detail]}.

--against gloo (the suite's ctest form) judges the run by gloo's: it passes when every test
gloo passes in this torch at this world size passes here too, but for the differences KNOWN
explains (torch itself treating third-party backends apart). gloo's passes come from
tests/torch/suite/gloo-<torch>-<ranks>.txt when recorded for this torch (--record writes it
from a gloo run), else from a gloo run made first, in the same call.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))

# Tests gloo passes that hccl cannot, because torch decides them by the backend's name or type,
# not by what the backend does. Each is still run and reported.
KNOWN = {
    "test_ddp_logging_data_cpu":
        "torch's DDP logger records ProcessGroup::getBackendName(), which is 'custom' for every "
        "third-party backend in torch 2.x; the test compares it with dist.get_backend() ('hccl')",
    "test_monitored_barrier_gloo":
        "dist.monitored_barrier raises 'only implemented for GLOO backend' for any other "
        "backend (distributed_c10d.py); the group's own monitored_barrier works on hccl",
    "test_monitored_barrier_gloo_rank_0_timeout":
        "as test_monitored_barrier_gloo: torch refuses the call before any backend sees it",
    "test_monitored_barrier_gloo_subgroup":
        "as test_monitored_barrier_gloo: torch refuses the call before any backend sees it",
    "test_monitored_barrier_allreduce_hang":
        "as test_monitored_barrier_gloo: torch refuses the call before any backend sees it",
    "test_monitored_barrier_allreduce_hang_wait_all_ranks":
        "as test_monitored_barrier_gloo: torch refuses the call before any backend sees it",
    "test_monitored_barrier_failure_order":
        "as test_monitored_barrier_gloo: torch refuses the call before any backend sees it",
    "test_monitored_barrier_wait_all_ranks":
        "as test_monitored_barrier_gloo: torch refuses the call before any backend sees it",
}


def _setup_env():
    """Module level, so spawned children (which import this file again) do the same. torch's
    test utilities import expecttest, which Debian does not package: the shim stands in."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        shim = os.path.join(os.path.dirname(HERE), "shim")
        sys.path.insert(0, shim)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (shim, os.environ.get("PYTHONPATH")) if p)
    if os.environ.get("TORCH_HCCL_PYTHONPATH") and os.environ["TORCH_HCCL_PYTHONPATH"] not in sys.path:
        sys.path.insert(0, os.environ["TORCH_HCCL_PYTHONPATH"])
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.environ["TORCH_HCCL_PYTHONPATH"], os.environ.get("PYTHONPATH")) if p)


_setup_env()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

if "TORCH_SUITE_BACKEND" in os.environ:
    try:
        # torch 1.13's harness turns on DDP's ReplicatedTensor mode in every rank, whose module
        # (torch.distributed._shard) does not import on Python 3.11 (a dataclass with a mutable
        # default): every DDP test would fail on any backend. Plain DDP, as users run it.
        import torch.nn.parallel._replicated_tensor_ddp_utils as _rt
        _rt._set_ddp_with_replicated_tensor = lambda value: None
    except ImportError:  # torch 2.x: the mode is gone
        pass
    # The decorators read BACKEND when distributed_test is imported: the gate's name.
    os.environ["BACKEND"] = os.environ.get("TORCH_SUITE_GATE") or os.environ["TORCH_SUITE_BACKEND"]
    if os.environ["TORCH_SUITE_BACKEND"] == "hccl":
        import torch_hccl  # noqa: F401  registers "hccl" (in every spawned process too)
    from torch.testing._internal.distributed import distributed_test as _dt  # noqa: E402

    class _GatedName(str):
        """The backend under test (its text: what init_process_group gets), which compares
        equal to the gate's name too: the tests' own branches on BACKEND (which model to
        build, what to expect) take the gate's path, as their decorators did."""
        gate = os.environ["BACKEND"]

        def __eq__(self, other):
            return str.__eq__(self, other) or other == self.gate

        def __ne__(self, other):
            return not self.__eq__(other)

        __hash__ = str.__hash__

    # Every process group is made with the backend under test.
    _dt.BACKEND = _GatedName(os.environ["TORCH_SUITE_BACKEND"])

    class TestDistBackendWithSpawn(_dt.TestDistBackend, _dt.DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            if os.environ.get("TORCH_SUITE_START") == "spawn":
                self._spawn_processes()
            else:  # fork: the same test bodies without importing torch again per rank
                self._start_processes(torch.multiprocessing.get_context("fork").Process)


class _Recorder(unittest.TextTestResult):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.outcome = {}
        self._t0 = 0.0

    def startTest(self, test):
        self._t0 = time.monotonic()
        super().startTest(test)

    def _note(self, test, status, detail=""):
        name = test.id().rsplit(".", 1)[-1]
        self.outcome[name] = [status, detail]
        print("%-4s %-70s %6.1fs %s" % (status, name, time.monotonic() - self._t0,
                                       detail.splitlines()[0][:100] if status == "SKIP" else ""),
              flush=True)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._note(test, "PASS")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._note(test, "SKIP", str(reason))

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._note(test, "FAIL", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._note(test, "FAIL", self._exc_info_to_string(err, test))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._note(test, "PASS")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._note(test, "FAIL", "unexpected success")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="hccl", choices=["hccl", "gloo"])
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--gate", default="", help="backend name the suite's gates see")
    ap.add_argument("--json", default="")
    ap.add_argument("--start", default="fork", choices=["fork", "spawn"],
                    help="how ranks start (torch's CI: spawn; fork is the same, faster)")
    ap.add_argument("--against", default="", help="judge by gloo's passes (see above)")
    ap.add_argument("--record", action="store_true",
                    help="with --backend gloo: write gloo-<torch>-<ranks>.txt")
    ap.add_argument("-k", action="append", default=[], help="only tests containing this")
    args = ap.parse_args()
    if args.against:
        sys.exit(against(args))
    tmp = tempfile.mkdtemp(prefix="torch_suite_")
    for d in ("barrier", "test_dir"):
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    os.environ.update(TORCH_SUITE_BACKEND=args.backend, TORCH_SUITE_GATE=args.gate,
                      WORLD_SIZE=str(args.world_size), TEMP_DIR=tmp, TORCH_SUITE_START=args.start,
                      INIT_METHOD="file://" + os.path.join(tmp, "init_file"))
    # Spawned children import this file as their main module and redo the setup above.
    os.execv(sys.executable, [sys.executable, __file__, "--_child_run"] + sys.argv[1:])


def child_run():
    argv = [a for a in sys.argv[1:] if a != "--_child_run"]
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend")
    ap.add_argument("--world-size")
    ap.add_argument("--gate")
    ap.add_argument("--json", default="")
    ap.add_argument("--start")
    ap.add_argument("--against")
    ap.add_argument("--record", action="store_true")
    ap.add_argument("-k", action="append", default=[])
    args = ap.parse_args(argv)
    loader = unittest.TestLoader()
    if args.k:
        loader.testNamePatterns = ["*%s*" % k for k in args.k]
    suite = loader.loadTestsFromTestCase(TestDistBackendWithSpawn)
    print("# PyTorch %s distributed_test on %s, %s ranks, gates see %r: %d tests" % (
        torch.__version__, args.backend, args.world_size, os.environ["BACKEND"],
        suite.countTestCases()), flush=True)
    runner = unittest.TextTestRunner(resultclass=_Recorder, verbosity=0, stream=open(os.devnull, "w"))
    res = runner.run(suite)
    out = res.outcome
    for name, (st, detail) in sorted(out.items()):
        if st == "FAIL":
            print("=" * 70 + "\nFAIL %s\n%s" % (name, detail))
    n = {s: sum(1 for v in out.values() if v[0] == s) for s in ("PASS", "FAIL", "SKIP")}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "backend": args.backend,
                       "world_size": int(args.world_size), "gate": os.environ["BACKEND"],
                       "tests": out}, f, indent=1, sort_keys=True)
    print("%d passed, %d failed, %d skipped" % (n["PASS"], n["FAIL"], n["SKIP"]))
    if args.record:
        with open(recorded_path(args.world_size), "w") as f:
            f.write("# gloo's passes in PyTorch %s's distributed_test.py at %s ranks "
                    "(torch_suite.py --backend gloo --world-size %s --record)\n"
                    % (torch.__version__, args.world_size, args.world_size))
            f.write("".join(k + "\n" for k, v in sorted(out.items()) if v[0] == "PASS"))
    return 0 if n["FAIL"] == 0 else 1


def recorded_path(world_size):
    return os.path.join(HERE, "gloo-%s-%s.txt" % (torch.__version__.split("+")[0], world_size))


def run_suite(backend, gate, world_size, start, k, json_path):
    cmd = [sys.executable, __file__, "--backend", backend, "--world-size", str(world_size),
           "--start", start, "--json", json_path] + (["--gate", gate] if gate else [])
    for pat in k:
        cmd += ["-k", pat]
    print("$ " + " ".join(cmd), flush=True)
    subprocess.call(cmd)
    with open(json_path) as f:
        return json.load(f)["tests"]


def against(args):
    """The ctest form: this backend with gloo's gates against gloo's passes."""
    tmp = tempfile.mkdtemp(prefix="torch_suite_cmp_")
    path = recorded_path(args.world_size)
    if os.path.exists(path) and not args.k:
        with open(path) as f:
            gloo = {line.strip() for line in f if line.strip() and not line.startswith("#")}
        print("# gloo's passes: %d, recorded in %s" % (len(gloo), os.path.relpath(path)))
    else:
        res = run_suite("gloo", "", args.world_size, args.start, args.k,
                        os.path.join(tmp, "gloo.json"))
        gloo = {k for k, v in res.items() if v[0] == "PASS"}
        print("# gloo's passes: %d, from a gloo run just now" % len(gloo))
    res = run_suite(args.backend, args.against, args.world_size, args.start, args.k,
                    os.path.join(tmp, args.backend + ".json"))
    mine = {k for k, v in res.items() if v[0] == "PASS"}
    missing = sorted(gloo - mine)
    explained = [t for t in missing if t in KNOWN]
    unexplained = [t for t in missing if t not in KNOWN]
    print("\n# PyTorch %s distributed_test at %s ranks: gloo passes %d, %s passes %d (%d of "
          "gloo's), %s passes %d gloo does not" % (
              torch.__version__, args.world_size, len(gloo), args.backend, len(mine),
              len(gloo & mine), args.backend, len(mine - gloo)))
    for t in explained:
        print("#   explained: %s: %s" % (t, KNOWN[t]))
    for t in unexplained:
        print("#   NOT PASSED on %s: %s (%s)" % (args.backend, t, res.get(t, ["not run"])[0]))
    print("%d passed, %d failed" % (len(gloo) - len(missing), len(unexplained)))
    return 1 if unexplained else 0


if __name__ == "__main__":
    if "--_child_run" in sys.argv:
        sys.exit(child_run())
    main()
