#!/usr/bin/env python3
"""train_bf16.py - step time of two clients that train in bfloat16, on hccl and on gloo, at 2, 4
and 8 ranks: FSDP2 (fully_shard, MixedPrecisionPolicy with bf16 parameters and reductions) and
DeepSpeed ZeRO-2 with bf16, the clients of tests/torch/test_bf16_clients.py
(tests/torch/clients/fsdp2_bf16.py, deepspeed_bf16.py), here on a model of about 25.8M
parameters (--size 25m: a decoder-only transformer, 8 blocks of width 512) with Adam.

    python3 bench/train_bf16.py --build build --steps 20

Each run is one npu-launch of the client (`--device-list 0,...,N-1`); a rank count's hccl and
gloo runs follow each other, from the same seed and data. The step time is the median of the
steps after the first (the slowest rank's), the final loss the last step's averaged over the
ranks. DeepSpeed runs with the Python given by --deepspeed-python (default: BUILD/deepspeed-venv
/bin/python, which scripts/quickstart.sh test makes, else --python when it imports deepspeed);
without one its rows say so. Prints a Markdown table; ratio = hccl step time / gloo step time
(below 1: hccl is faster).

Few tokens by default (1 sequence of 16 per rank and step): on a CPU without bf16 arithmetic
(AVX2 only, as the 2-core development machine), torch's bf16 matmuls run at about 1.5-2
GFLOP/s, 30 times slower than its float32 ones (forward and backward of this model over 4 x 64
tokens took 26 s in bf16, 0.8 s in float32, one thread), so computing dwarfs the 52 MB of bf16
gradients and parameters each step moves, and a step's time says little about the library
unless the batch is small. --batch and --seq choose another.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CLIENTS = os.path.join(ROOT, "tests", "torch", "clients")


def parse():
    ap = argparse.ArgumentParser(
        prog="train_bf16.py",
        description="FSDP2 and DeepSpeed ZeRO-2 bf16 step time on hccl and gloo (a table).")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"),
                    help="build tree: BUILD/bin/npu-launch and BUILD/python (default ./build)")
    ap.add_argument("--ranks", default="2,4,8", help="rank counts, comma-separated (2,4,8)")
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps per run (20)")
    ap.add_argument("--size", default="25m", choices=["25m", "small"],
                    help="model: 25m (~25.8M parameters, default) or small (~0.1M)")
    ap.add_argument("--batch", type=int, default=1, help="sequences per rank and step (1)")
    ap.add_argument("--seq", type=int, default=16,
                    help="tokens per sequence (16; the 25m model takes up to 64, small 16)")
    ap.add_argument("--optimizer", default="adam", choices=["adam", "sgd"])
    ap.add_argument("--clients", default="fsdp2,deepspeed",
                    help="which clients, comma-separated (fsdp2,deepspeed)")
    ap.add_argument("--python", default="",
                    help="Python for FSDP2 (default: BUILD/python/INTERPRETER, else this one)")
    ap.add_argument("--deepspeed-python", default="",
                    help="Python that imports deepspeed (default BUILD/deepspeed-venv/bin/python)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds one run may take (3600)")
    ap.add_argument("--keep", default="", help="folder to keep each run's JSON and output in")
    args = ap.parse_args()
    ranks = []
    for r in args.ranks.split(","):
        if r not in ("1", "2", "4", "8"):
            ap.error("--ranks %s: %r is not 1, 2, 4 or 8 (ranks of one server)" % (args.ranks, r))
        ranks.append(int(r))
    args.ranks = ranks
    args.clients = args.clients.split(",")
    for c in args.clients:
        if c not in ("fsdp2", "deepspeed"):
            ap.error("--clients: %r is not fsdp2 or deepspeed" % c)
    if args.steps < 2:
        ap.error("--steps %d: at least 2 (the first step is not timed)" % args.steps)
    return args


def default_python(args):
    try:
        with open(os.path.join(args.build, "python", "INTERPRETER")) as f:
            return f.read().strip()
    except OSError:
        return sys.executable


def find_deepspeed(args, env):
    cands = [args.deepspeed_python] if args.deepspeed_python else [
        os.path.join(args.build, "deepspeed-venv", "bin", "python"), args.python]
    for py in cands:
        if py and os.path.exists(py) and subprocess.run(
                [py, "-c", "import deepspeed"], env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL).returncode == 0:
            return py
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def run(args, env, py, client, backend, n, work):
    """One run; returns (result dict, None) or (None, why)."""
    out = os.path.join(work, "%s_%s_%d.json" % (client, backend, n))
    cmd = [os.path.join(args.build, "bin", "npu-launch"), "--master-port", str(free_port()),
           "--device-list", ",".join(str(r) for r in range(n)), "--", py,
           os.path.join(CLIENTS, client + "_bf16.py"), "--backend", backend,
           "--size", args.size, "--steps", str(args.steps), "--batch", str(args.batch),
           "--seq", str(args.seq), "--optimizer", args.optimizer, "--out", out]
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=args.timeout, start_new_session=True)
    except subprocess.TimeoutExpired:
        return None, "timed out after %d s" % args.timeout
    with open(out[:-5] + ".log", "w") as f:
        f.write(p.stdout)
    if p.returncode != 0 or not os.path.exists(out):
        sys.stderr.write("train_bf16.py: %s on %s at %d ranks exited %d; its output ends:\n%s\n"
                         % (client, backend, n, p.returncode, p.stdout[-3000:]))
        return None, "exit %d" % p.returncode
    with open(out) as f:
        return json.load(f), None


def main():
    args = parse()
    args.python = args.python or default_python(args)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", DS_ACCELERATOR="cpu")
    env["PYTHONPATH"] = os.path.join(args.build, "python") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    work = args.keep or tempfile.mkdtemp(prefix="train_bf16_")
    os.makedirs(work, exist_ok=True)
    pythons = {"fsdp2": args.python}
    if "deepspeed" in args.clients:
        pythons["deepspeed"] = find_deepspeed(args, env)
        if pythons["deepspeed"]:
            # Its CPU accelerator builds a C++ op the first time it starts: here, untimed.
            subprocess.run([pythons["deepspeed"], "-c",
                            "from deepspeed.accelerator import get_accelerator; "
                            "get_accelerator().create_op_builder('ShareMemCommBuilder').load()"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=1800)

    print("bf16 training, %s model, %d steps of %s, %d x %d tokens per rank and step; step "
          "time: median after the first, slowest rank" % (args.size, args.steps, args.optimizer,
                                                          args.batch, args.seq))
    print()
    print("| client | ranks | params | step hccl (ms) | step gloo (ms) | ratio hccl/gloo "
          "| final loss hccl | final loss gloo |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    sys.stdout.flush()
    for client in args.clients:
        for n in args.ranks:
            if not pythons[client]:
                print("| %s | %d | | not installed (--deepspeed-python) | | | | |" % (client, n))
                continue
            res = {}
            for backend in ("hccl", "gloo"):
                res[backend] = run(args, env, pythons[client], client, backend, n, work)
            cells = []
            for key, fmt in (("step_time_s", "%.1f"), ("losses", "%.4f")):
                for backend in ("hccl", "gloo"):
                    r, why = res[backend]
                    if r is None:
                        cells.append(why)
                    else:
                        v = r[key][-1] if key == "losses" else 1e3 * r[key]
                        cells.append(fmt % v)
            h, g = res["hccl"][0], res["gloo"][0]
            ratio = "%.2f" % (h["step_time_s"] / g["step_time_s"]) if h and g else ""
            params = "%.1fM" % ((h or g)["params"] / 1e6) if (h or g) else ""
            print("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
                client, n, params, cells[0], cells[1], ratio, cells[2], cells[3]))
            sys.stdout.flush()
    if args.keep:
        print("\neach run's JSON and output: %s" % work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
