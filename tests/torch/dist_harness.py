"""dist_harness.py - runs a test's rank function in N real processes, as a launcher would.

A test file calls `worker_main()` first thing when it is started as a rank
(`python3 <file> --worker <case>`), and its unittest methods call `run_ranks(...)`, which starts
N processes of the same file with RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT set,
waits for them under a deadline (killing every rank's process group on expiry, so nothing
outlives a test), and returns each rank's exit code and output. Inside a rank, `init(kind)`
joins the default group by env://, tcp:// or file://.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "docs"))
from docblocks import free_port  # noqa: E402,F401  (one port chooser for every test)
BUILD_PYTHON = os.environ.get("TORCH_HCCL_PYTHONPATH", "")


class Result:
    def __init__(self, codes, outputs, elapsed):
        self.codes, self.outputs, self.elapsed = codes, outputs, elapsed

    def text(self):
        return "\n".join("--- rank %d (exit %s) ---\n%s" % (r, c, o)
                         for r, (c, o) in enumerate(zip(self.codes, self.outputs)))


def run_ranks(script, case, n, timeout=120, env=None, init="env", kill=None):
    """Runs `case` of `script` on n ranks. kill=(rank, seconds): SIGKILL that rank after that
    many seconds. Returns a Result; raises AssertionError on the deadline."""
    port = free_port()
    shared = tempfile.mkdtemp(prefix="torch_hccl_test_")
    procs = []
    outs = []
    for r in range(n):
        e = dict(os.environ)
        e.update(RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(n),
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                 HCCL_TEST_INIT=init, HCCL_TEST_SHARED=shared)
        if BUILD_PYTHON:
            e["PYTHONPATH"] = BUILD_PYTHON + os.pathsep + e.get("PYTHONPATH", "")
        if env:
            e.update(env)
        f = tempfile.TemporaryFile(mode="w+")
        outs.append(f)
        procs.append(subprocess.Popen([sys.executable, script, "--worker", case], env=e,
                                      stdout=f, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    start = time.monotonic()
    killed = False
    try:
        while any(p.poll() is None for p in procs):
            now = time.monotonic() - start
            if kill and not killed and now >= kill[1]:
                os.killpg(procs[kill[0]].pid, signal.SIGKILL)
                killed = True
            if now > timeout:
                for p in procs:  # Python stacks of every rank still running, then the kill
                    if p.poll() is None:
                        os.kill(p.pid, signal.SIGUSR1)
                time.sleep(1)
                raise AssertionError("case %s on %d ranks ran past %d s:\n%s" % (
                    case, n, timeout, _collect(procs, outs, force=True).text()))
            time.sleep(0.02)
        return _collect(procs, outs, elapsed=time.monotonic() - start)
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()


def _collect(procs, outs, force=False, elapsed=0.0):
    if force:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
    texts = []
    for f in outs:
        f.seek(0)
        texts.append(f.read())
        f.close()
    return Result([p.returncode for p in procs], texts, elapsed)


def init(kind=None, **kw):
    """Joins the default group with backend hccl by env://, tcp:// or file://."""
    import torch.distributed as dist
    import torch_hccl  # noqa: F401  (registers "hccl")
    kind = kind or os.environ.get("HCCL_TEST_INIT", "env")
    rank, n = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if kind == "env":
        dist.init_process_group("hccl", **kw)
    elif kind == "tcp":
        dist.init_process_group("hccl", init_method="tcp://127.0.0.1:%s" % os.environ["MASTER_PORT"],
                                rank=rank, world_size=n, **kw)
    elif kind == "file":
        path = os.path.join(os.environ["HCCL_TEST_SHARED"], "store")
        dist.init_process_group("hccl", init_method="file://" + path, rank=rank, world_size=n, **kw)
    else:
        raise ValueError("unknown init kind " + kind)
    return rank, n


def worker_main(cases):
    """When started as a rank: runs cases[name]() and exits 0, or prints the error and exits 1."""
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        import faulthandler
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        try:
            cases[sys.argv[2]]()
        except SystemExit:
            raise
        except BaseException:
            traceback.print_exc()
            sys.stdout.flush()
            os._exit(1)
        sys.stdout.flush()
        os._exit(0)
