"""recipes_harness.py - what the recipe tests share (test_hf_trainer.py, test_accelerate.py,
test_deepspeed_zero.py):
finding a Python that has the client libraries with this very torch, running a client script at
2 ranks under a launcher, and comparing two runs.

The clients' Python is the first of: $CLIENTS_PYTHON, $DEEPSPEED_PYTHON, this Python, and
BUILD/deepspeed-venv/bin/python, which scripts/quickstart.sh test makes (a venv with
--system-site-packages over the Python torch_hccl was built for, holding the pinned DeepSpeed,
transformers and accelerate), that imports every module asked for and has this torch.
"""
import glob
import json
import os
import shlex
import subprocess
import sys
import time

import torch

import dist_harness as H

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "docs"))
import docblocks  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLIENTS = os.path.join(HERE, "clients")
BUILD_PYTHON = os.environ.get("TORCH_HCCL_PYTHONPATH", "")
BUILD = os.path.dirname(BUILD_PYTHON) if BUILD_PYTHON else os.path.join(ROOT, "build")
NPU_LAUNCH = os.path.join(os.environ.get("HCCL_BIN_DIR", os.path.join(BUILD, "bin")), "npu-launch")
RANKS = 2
# What quickstart.sh installs (and docs/pytorch.md shows); the skip message repeats it.
PINS = "deepspeed==0.19.8 transformers==5.24.0 accelerate==1.15.0"


def env_for_runs():
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", DS_ACCELERATOR="cpu",
               HF_HUB_OFFLINE="1", TRANSFORMERS_NO_ADVISORY_WARNINGS="1")
    if BUILD_PYTHON:
        env["PYTHONPATH"] = BUILD_PYTHON + os.pathsep + env.get("PYTHONPATH", "")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


def skip_reason_or_python(modules, then=""):
    """(python, None) for the first Python that imports MODULES with this torch, else
    (None, why to skip). THEN: Python run after the imports in that same process (one start
    of torch and MODULES, not two); its failure raises AssertionError, as it is no reason to
    skip."""
    if int(torch.__version__.split(".")[0]) < 2:
        return None, ("torch %s: the suite installs %s for pip's torch 2.x only (scripts/"
                      "quickstart.sh test)" % (torch.__version__, ", ".join(modules)))
    cands = [os.environ.get("CLIENTS_PYTHON", ""), os.environ.get("DEEPSPEED_PYTHON", ""),
             sys.executable, os.path.join(BUILD, "deepspeed-venv", "bin", "python")]
    why = []
    for py in dict.fromkeys(c for c in cands if c):
        if not os.path.exists(py):
            why.append("%s: not there" % py)
            continue
        p = subprocess.run([py, "-c", "import torch, %s; print('torch=' + torch.__version__, "
                            "flush=True)\n%s" % (", ".join(modules), then)], env=env_for_runs(),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=900 if then else 300)
        lines = p.stdout.strip().splitlines()
        seen = [ln[6:] for ln in lines if ln.startswith("torch=")]
        if p.returncode != 0 and seen == [torch.__version__]:
            raise AssertionError("%s imports %s, then failed in:\n%s\n%s"
                                 % (py, ", ".join(modules), then, p.stdout[-4000:]))
        if p.returncode != 0:
            why.append("%s: %s" % (py, lines[-1] if lines else "exit %d" % p.returncode))
        elif seen != [torch.__version__]:
            why.append("%s: torch %s, not this torch %s" % (py, seen, torch.__version__))
        else:
            return py, None
    return None, ("%s not importable (%s): bash scripts/quickstart.sh test installs them "
                  "(python3 -m venv --system-site-packages %s/deepspeed-venv, then its pip "
                  "install %s torch==%s)" % (", ".join(modules), "; ".join(why), BUILD, PINS,
                                             torch.__version__.split("+")[0]))


def deepspeed_python():
    """skip_reason_or_python(["deepspeed"]), building in the same process the C++ op DeepSpeed's
    CPU accelerator builds the first time it starts (its shared-memory allreduce: a minute or
    more, cached in ~/.cache/torch_extensions; scripts/quickstart.sh builds it once), so that
    no run of a test pays for it, or builds it twice at once."""
    return skip_reason_or_python(["deepspeed"], then=(
        "from deepspeed.accelerator import get_accelerator\n"
        "get_accelerator().create_op_builder('ShareMemCommBuilder').load()"))


# torch's gloo can abort a process as it ends, after the job's work and its report: its worker
# threads still joinable at teardown ("terminate called without an active exception", SIGABRT,
# in gloo's process; no hccl group exists there). Seen on 2026-12-06 on the gloo reference of
# FSDP2 (test_bf16_clients) and on 2026-12-07 on hf_trainer's (test_hf_trainer), each after the
# run printed its losses, once in a whole side-by-side suite run. A gloo reference that ends so
# is run once more (gloo_reference); hccl's runs never get a second try.
GLOO_EXIT_ABORT = "terminate called without an active exception"


def gloo_reference(backend, what, fn, *args, **kwargs):
    """fn(*args, **kwargs); when BACKEND is gloo and it failed with gloo's abort at exit (its
    AssertionError's text has GLOO_EXIT_ABORT), once more, saying so. Any other failure, and
    any failure of another backend, is raised as it came."""
    try:
        return fn(*args, **kwargs)
    except AssertionError as e:
        if backend != "gloo" or GLOO_EXIT_ABORT not in str(e):
            raise
        print("%s on gloo aborted at its exit (torch's gloo teardown); its reference run again"
              % what)
        return fn(*args, **kwargs)


def launch(python, script, backend, out, flags=(), launcher="npu-launch", cap=240):
    """Runs clients/SCRIPT at RANKS ranks under npu-launch (or DeepSpeed's launcher, `deepspeed`
    beside PYTHON); returns (rank 0's JSON, output, seconds from start to exit). A gloo run that
    aborted at its exit is run once more (gloo_reference)."""
    return gloo_reference(backend, script, launch_once, python, script, backend, out, flags,
                          launcher, cap)


def drop_deepspeed_shm():
    """DeepSpeed's CPU allreduce leaves its shared-memory buffers behind when a job ends
    (/dev/shm/deepspeed_allreduce_buffer_..._<master port>_<rank>, 69 MB each): after each run
    those no live process maps are removed, so the suite does not fill /dev/shm (RAM) run
    after run. A buffer a running job made (another test's) is mapped by its maker from its
    creation on, and is left."""
    names = glob.glob("/dev/shm/deepspeed_allreduce_buffer_*")
    if not names:
        return
    mapped = set()
    for maps in glob.glob("/proc/[0-9]*/maps"):
        try:
            with open(maps) as f:
                mapped.update(line.split(None, 5)[5].strip() for line in f
                              if "deepspeed_allreduce_buffer_" in line)
        except (OSError, IndexError):
            pass
    for name in names:
        if name not in mapped:
            try:
                os.remove(name)
            except OSError:
                pass


def launch_once(python, script, backend, out, flags, launcher, cap):
    """One run of launch(), DeepSpeed's leftover buffers removed after it."""
    try:
        return run_once(python, script, backend, out, flags, launcher, cap)
    finally:
        drop_deepspeed_shm()


def run_once(python, script, backend, out, flags, launcher, cap):
    """One run of launch(), as it is."""
    port = str(H.free_port())  # never a fixed port: the machine is shared
    args = [os.path.join(CLIENTS, script), "--backend", backend, "--out", out] + list(flags)
    if launcher == "deepspeed":
        cmd = [python, os.path.join(os.path.dirname(python), "deepspeed"), "--num_gpus",
               str(RANKS), "--master_port", port] + args
    else:
        cmd = [NPU_LAUNCH, "--master-port", port, "--device-list",
               ",".join(str(r) for r in range(RANKS)), "--", python] + args
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env_for_runs(), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=cap,
                           start_new_session=True)
    except subprocess.TimeoutExpired as e:
        text = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else e.stdout
        raise AssertionError("%s on %s (%s) did not finish in %d s:\n%s" % (
            script, backend, launcher, cap, (text or "")[-6000:]))
    secs = time.monotonic() - t0
    if p.returncode != 0:
        raise AssertionError("%s on %s (%s) exited %d:\n%s" % (
            script, backend, launcher, p.returncode, p.stdout[-6000:]))
    with open(out) as f:
        return json.load(f), p.stdout, secs


def launch_doc(python, doc, key, out, cap=240):
    """Runs the block of DOC (docs/pytorch.md) marked `by KEY` (tests/docs/docblocks.py) as the
    command as written, with --out OUT added at its end, a free --master-port given to
    npu-launch (a test machine is shared: never the default port), and PYTHON's folder for the
    page's build/deepspeed-venv/bin/ when they differ (they do not in the suite:
    quickstart.sh makes that venv). The page's checks of the block apply. Returns what
    launch() returns."""
    body, args, samples = docblocks.block_by(ROOT, doc, key)
    venv = os.path.join(BUILD, "deepspeed-venv", "bin")
    if os.path.realpath(os.path.dirname(python)) != os.path.realpath(venv):
        body = body.replace("build/deepspeed-venv/bin/", os.path.dirname(python) + "/")
    body = docblocks.with_free_port(body)
    body = body.rstrip() + " --out " + shlex.quote(out)
    t0 = time.monotonic()
    try:
        text = docblocks.run_block(ROOT, BUILD, sys.executable, body, args, samples,
                                   env_for_runs(), timeout=cap)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("%s's block (%s) did not finish in %d s:\n%s" % (doc, key, cap, e))
    finally:
        drop_deepspeed_shm()
    secs = time.monotonic() - t0
    with open(out) as f:
        return json.load(f), text, secs


def pair(test, python, out_dir, script, flags=(), cap=180, doc=None):
    """Runs clients/SCRIPT.py on gloo, then on hccl, under npu-launch; returns {backend: (rank
    0's JSON, its parameters from OUT.pt, seconds)}. DOC=(page, key): the hccl run is that
    page's block (launch_doc), which must run SCRIPT with FLAGS."""
    res = {}
    for backend in ("gloo", "hccl"):
        out = os.path.join(out_dir, "%s_%s.json" % (script, backend))
        if backend == "hccl" and doc:
            r, log, secs = launch_doc(python, doc[0], doc[1], out, cap=cap)
        else:
            r, log, secs = launch(python, script + ".py", backend, out, flags, cap=cap)
        test.assertEqual(r["backend"], backend, log)
        test.assertEqual(r["world_size"], RANKS)
        res[backend] = (r, torch.load(out + ".pt"), secs)
    return res


def compare(test, name, hccl, gloo, hccl_params, gloo_params, loss_bound, param_bound,
            learned=0.9):
    """The checks every recipe makes of a pair of runs: hccl's losses equal gloo's to
    LOSS_BOUND at every step, the run learned (last loss below LEARNED times the first), every hccl rank ends with the same parameters,
    and they equal gloo's to PARAM_BOUND (largest absolute difference). Returns a summary."""
    test.assertEqual(len(hccl["losses"]), len(gloo["losses"]))
    test.assertLess(hccl["losses"][-1], learned * hccl["losses"][0], "%s did not learn: %s" % (
        name, hccl["losses"]))
    bad = [(i, h, g) for i, (h, g) in enumerate(zip(hccl["losses"], gloo["losses"]))
           if not abs(h - g) <= loss_bound]
    test.assertEqual(bad, [], "%s: steps whose loss differs by more than %g (step, hccl, gloo)"
                     % (name, loss_bound))
    test.assertEqual(len(hccl["param_sha256"]), RANKS)
    test.assertEqual(len(set(hccl["param_sha256"])), 1,
                     "%s: ranks end with different parameters: %s" % (name, hccl["param_sha256"]))
    pdiff = float((hccl_params - gloo_params).abs().max())
    test.assertLessEqual(pdiff, param_bound, "%s: parameters differ from gloo's by %g"
                         % (name, pdiff))
    ldiff = max(abs(h - g) for h, g in zip(hccl["losses"], gloo["losses"]))
    return ("%s: loss %.4f -> %.4f; largest difference from gloo: loss %.3g, parameter %.3g (%s); "
            "step gloo %.1f ms, hccl %.1f ms" % (
                name, hccl["losses"][0], hccl["losses"][-1], ldiff, pdiff,
                "bit-identical" if ldiff == 0 and pdiff == 0 else "not bit-identical",
                1e3 * gloo["step_time_s"], 1e3 * hccl["step_time_s"]))
