#!/usr/bin/python3
"""torch_allreduce_perf.py - allreduce_perf's flags and output for torch.distributed, on the
backend named by --backend (gloo, the default, hccl through torch_hccl, or deepspeed-shm), so
bench/compare.sh can put torch's backends next to libhccl's own allreduce_perf and MPI.

--backend deepspeed-shm times DeepSpeed's CPU shared-memory allreduce,
deepspeed.comm.inference_all_reduce, over a gloo group (gloo carries the setup, the header
and the checking; the timed calls are DeepSpeed's). It needs deepspeed installed, every rank on
this machine with LOCAL_SIZE = WORLD_SIZE (the deepspeed launcher sets it; so does this script
from LOCAL_WORLD_SIZE), float, half or bfloat16 data and -o sum. DeepSpeed silently falls back
to gloo's allreduce when its op is not built or the CPU lacks AVX2 (AVX-512BW for 16-bit
types); this script refuses to run then (exit 1, the reason on stderr), so a number in its
column is always DeepSpeed's own path. Start it with the deepspeed launcher:

    deepspeed --num_gpus 4 --master_port 29600 bench/torch_allreduce_perf.py --backend deepspeed-shm -b 4K -e 64M -f 4

    npu-launch --device-list 0-3 -- /usr/bin/python3 bench/torch_allreduce_perf.py --backend hccl -b 4K -e 64M -f 4

One process per rank, started like allreduce_perf (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
set; env:// rendezvous). Rank 0 prints the same table as allreduce_perf (perf/perf_common.c):
same flags, same loop order (size, type, op), same checking data (the exact result does not
depend on the reduction order), same footer and exit codes (0 ok, 1 wrong, 2 bad flags).

torch's allreduce is in-place only, so "out-of-place" here is recv.copy_(send) followed by an
in-place allreduce of recv: the copy is part of the time, as it would be for a user.
"""
import os
import socket
import sys
import time

PROG = "torch_allreduce_perf"
# The card's four, then types torch_hccl reduces by another route (docs/pytorch.md).
TYPES = ["int8", "int32", "half", "float", "int64", "double", "bfloat16"]
OPS = ["sum", "prod", "max", "min"]
AVG = ["rank0", "avg", "min", "max"]
USAGE = """Usage: %s [--backend gloo|hccl|deepspeed-shm] [flags]   (one process per rank; rank 0 prints)
  --backend NAME  gloo, hccl (torch_hccl) or deepspeed-shm; must come first default gloo
  -b <bytes>  smallest size (K, M, G = powers of 1024)                      default 32M
  -e <bytes>  largest size, >= -b                                           default 32M
  -f <n>      multiply the size by n (>= 2) each step                       default 2
  -i <bytes>  add this many bytes each step instead of -f
  -n <n>      timed iterations per line (>= 1)                              default 20
  -w <n>      warm-up iterations (>= 0)                                     default 1
  -c <0|1>    check the results                                             default 1
  -d <type>   int8, int32, half, float, int64, double, bfloat16 or all      default float
  -o <op>     sum, prod, max, min or all                                    default sum
  -a <0-3>    time across ranks: 0 rank 0, 1 average, 2 min, 3 max         default 1
  -z <0|1>    accepted and shown in the header; every call blocks          default 1
  -g 1, -t 1  accepted for nccl-tests command lines (one device, one thread)
  -h, --help  this help
allreduce_perf's table and exit codes: 0 ok, 1 wrong results or a failed call, 2 bad flags.
""" % PROG


def usage_error(msg):
    if os.environ.get("RANK", "0") in ("", "0"):
        sys.stderr.write("%s: %s\nRun '%s --help' for the list of flags.\n" % (PROG, msg, PROG))
    sys.exit(2)


def parse_size(flag, s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    body, m = (s[:-1], mult[s[-1].upper()]) if s and s[-1].upper() in mult else (s, 1)
    if not body.isdigit():
        usage_error("-%s '%s' is not a size: expected a number of bytes with an optional K, M "
                    "or G suffix (powers of 1024), e.g. 8, 4K, 64M" % (flag, s))
    return int(body) * m


def parse_int(flag, s, lo, hi):
    try:
        v = int(s)
    except ValueError:
        v = None
    if v is None or v < lo or v > hi:
        usage_error("-%s '%s' is not valid: expected an integer from %d to %d" % (flag, s, lo, hi))
    return v


def parse_args(argv):
    o = dict(b=32 << 20, e=32 << 20, f=2, i=0, n=20, w=1, c=1, a=1, z=1,
             d=["float"], o=["sum"])
    seen = set()
    k = 0
    while k < len(argv):
        a = argv[k]
        if a in ("-h", "--help"):
            sys.stdout.write(USAGE)
            sys.exit(0)
        if len(a) != 2 or a[0] != "-" or a[1] not in "befinwcdoazgt":
            usage_error("unknown flag %s" % a if a.startswith("-") else
                        "unexpected argument '%s': every setting is a flag with a value" % a)
        if k + 1 >= len(argv):
            usage_error("flag %s needs a value" % a)
        f, v = a[1], argv[k + 1]
        k += 2
        seen.add(f)
        if f in "bei":
            o[f] = parse_size(f, v)
        elif f == "f":
            o[f] = parse_int(f, v, 2, 1 << 30)
        elif f in "nw":
            o[f] = parse_int(f, v, 1 if f == "n" else 0, 100000000)
        elif f in "cz":
            o[f] = parse_int(f, v, 0, 1)
        elif f == "a":
            o[f] = parse_int(f, v, 0, 3)
        elif f == "d":
            if v != "all" and v not in TYPES:
                usage_error("-d '%s' is not a type this benchmark reduces: expected %s or all"
                            % (v, ", ".join(TYPES)))
            o[f] = TYPES if v == "all" else [v]
        elif f == "o":
            if v != "all" and v not in OPS:
                usage_error("-o '%s' is not an op: expected sum, prod, max, min or all" % v)
            o[f] = OPS if v == "all" else [v]
        elif v != "1":  # -g, -t
            usage_error("-%s '%s' is not supported: one device and one thread per process" % (f, v))
    if "i" in seen and o["i"] == 0:
        usage_error("-i '0' is not valid: the increment must be at least 1 byte")
    if "f" in seen and "i" in seen:
        usage_error("-f and -i both given: the size either grows by a factor (-f) or by a fixed "
                    "step (-i), choose one")
    if "i" in seen:
        o["f"] = 0
    if o["e"] < o["b"]:
        usage_error("-e %d is smaller than -b %d: the largest size must be at least the smallest"
                    % (o["e"], o["b"]))
    return o


def sizes(o):
    s = o["b"]
    while True:
        yield s
        nxt = s * o["f"] if o["f"] > 1 else s + o["i"]
        if nxt > o["e"] or nxt == s:
            return
        s = nxt


def deepspeed_setup(o):
    """Checks what DeepSpeed's shm allreduce needs; returns a function that initialises
    deepspeed.comm over gloo and returns the allreduce to time. Exits 1 naming what is
    missing, since DeepSpeed itself would fall back to gloo without a word."""
    def fail(msg):
        sys.stderr.write("%s: deepspeed-shm: %s\n" % (PROG, msg))
        sys.exit(1)

    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    if "RANK" in os.environ and "LOCAL_SIZE" not in os.environ:
        # npu-launch and torchrun give LOCAL_WORLD_SIZE; DeepSpeed's shm op reads LOCAL_SIZE
        if "LOCAL_WORLD_SIZE" in os.environ:
            os.environ["LOCAL_SIZE"] = os.environ["LOCAL_WORLD_SIZE"]
    try:
        import deepspeed
        import deepspeed.comm as dscomm
    except Exception as e:  # ImportError, or an accelerator probe that fails
        fail("cannot import deepspeed (%s: %s); pip install deepspeed" % (type(e).__name__, e))

    def init():
        import torch
        if "RANK" not in os.environ:
            os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_SIZE="1", MASTER_ADDR="127.0.0.1")
            os.environ.setdefault("MASTER_PORT", "29500")
        if os.environ.get("LOCAL_SIZE") != os.environ.get("WORLD_SIZE"):
            fail("LOCAL_SIZE=%s but WORLD_SIZE=%s: the shm allreduce needs every rank on this "
                 "machine and LOCAL_SIZE set (the deepspeed launcher sets it)"
                 % (os.environ.get("LOCAL_SIZE"), os.environ.get("WORLD_SIZE")))
        try:
            deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False,
                                       verbose=False)
        except Exception as e:
            fail("init_distributed(gloo) failed: %s: %s" % (type(e).__name__, e))
        cdb = dscomm.comm.cdb
        if getattr(cdb, "shm_comm_op", None) is None:
            fail("DeepSpeed's ShareMemCommBuilder op did not build or load (see the JIT "
                 "output above); inference_all_reduce would fall back to gloo")
        level = getattr(cdb, "shm_vector_kernel_level", 0)
        need = 2 if set(o["d"]) & {"half", "bfloat16"} else 1
        if level < need:
            fail("this CPU's vector level is %d, the shm kernels need %d (AVX2 for float, "
                 "AVX-512BW for 16-bit types); inference_all_reduce would fall back to gloo"
                 % (level, need))
        if not hasattr(torch.ops.deepspeed, "inference_all_reduce_"):
            fail("torch.ops.deepspeed.inference_all_reduce_ is not registered")
        return lambda t: dscomm.inference_all_reduce(t, op=dscomm.ReduceOp.SUM)

    return init


def main():
    # the deepspeed launcher passes --local_rank=N first (LOCAL_RANK carries the same)
    argv = [a for a in sys.argv[1:] if not a.startswith("--local_rank=")]
    backend = "gloo"
    if len(argv) >= 2 and argv[0] == "--backend":
        backend, argv = argv[1], argv[2:]
    if backend not in ("gloo", "hccl", "deepspeed-shm"):
        usage_error("--backend '%s' is not known: expected gloo, hccl or deepspeed-shm" % backend)
    o = parse_args(argv)
    if backend == "deepspeed-shm":
        bad = [d for d in o["d"] if d not in ("float", "half", "bfloat16")]
        if bad or o["o"] != ["sum"]:
            usage_error("--backend deepspeed-shm reduces float, half and bfloat16 with sum only "
                        "(inference_all_reduce); got -d %s -o %s"
                        % (",".join(o["d"]), ",".join(o["o"])))
    import torch
    import torch.distributed as dist
    if backend == "hccl":
        import torch_hccl  # noqa: F401  (registers the backend)
    ds_allreduce = None
    if backend == "deepspeed-shm":
        ds_allreduce = deepspeed_setup(o)

    dtypes = {"int8": torch.int8, "int32": torch.int32, "half": torch.float16,
              "float": torch.float32, "int64": torch.int64, "double": torch.float64,
              "bfloat16": torch.bfloat16}
    esize = {"int8": 1, "int32": 4, "half": 2, "float": 4, "int64": 8, "double": 8, "bfloat16": 2}
    rops = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "max": dist.ReduceOp.MAX,
            "min": dist.ReduceOp.MIN}
    if "RANK" not in os.environ:  # no launcher: one rank, like allreduce_perf
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
    if ds_allreduce is None:
        dist.init_process_group(backend, init_method="env://")
    else:
        ds_allreduce = ds_allreduce()
    rank, p = dist.get_rank(), dist.get_world_size()

    # header: every rank's pid and device (LOCAL_RANK), gathered like allreduce_perf does
    me = torch.tensor([rank, os.getpid(), int(os.environ.get("LOCAL_RANK", rank))],
                      dtype=torch.int64)
    infos = [torch.zeros(3, dtype=torch.int64) for _ in range(p)]
    dist.all_gather(infos, me)
    if rank == 0:
        name = backend
        if backend == "deepspeed-shm":
            import deepspeed
            name = "deepspeed %s shm inference_all_reduce" % deepspeed.__version__
        print("# %s (torch %s %s) nranks %d" % (PROG, torch.__version__, name, p))
        step = ("%d(factor)" % o["f"]) if o["f"] > 1 else ("%d(bytes)" % o["i"])
        print("# minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d validation: %d "
              "average: %d(%s) blocking: %d" % (o["b"], o["e"], step, o["w"], o["n"], o["c"],
                                                o["a"], AVG[o["a"]], o["z"]))
        print("# Loop order: for each size, for each type, for each op; out-of-place then "
              "in-place")
        print("# torch twin: out-of-place = copy into recv + in-place allreduce")
        print("#\n# Using devices")
        host = socket.gethostname()
        for t in infos:
            print("#  Rank %2d Group  0 Pid %6d on %10s device %2d" % (t[0], t[1], host, t[2]))
        print("#")
        print("#" + " " * 62 + "out-of-place" + " " * 23 + "in-place          ")
        print("#       size         count      type   redop    root     time   algbw   busbw "
              "#wrong     time   algbw   busbw #wrong")
        print("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)  "
              "          (us)  (GB/s)  (GB/s)       ")
        sys.stdout.flush()

    period = 105 * p
    e = torch.arange(period, dtype=torch.int64)

    def value(op, r):
        if op == "sum":
            return (7 * r + e) % 5 - 2
        if op == "prod":
            k = (r + e) % 3
            v = torch.full_like(e, -1)
            v[k == 0] = 1
            v[k == 1] = 2 if r < 8 else 1
            return v
        return (r + e) % p + e % 7 - 3

    def tables(tname, op):
        dt = dtypes[tname]
        vals = [value(op, r).to(dt) for r in range(p)]  # stored in the type (int8 wraps)
        wide = torch.int64 if tname in ("int8", "int32", "int64") else torch.float64
        acc = vals[0].to(wide)
        for v in vals[1:]:
            v = v.to(wide)
            acc = (acc + v if op == "sum" else acc * v if op == "prod"
                   else torch.maximum(acc, v) if op == "max" else torch.minimum(acc, v))
        return vals[rank], acc.to(dt)

    def tile(tab, count):
        reps = (count + period - 1) // period
        return tab.repeat(max(reps, 1))[:count].clone()

    def combine(us):
        if o["a"] == 0:
            return us
        t = torch.tensor([us], dtype=torch.float32)
        dist.all_reduce(t, [dist.ReduceOp.SUM, dist.ReduceOp.SUM, dist.ReduceOp.MIN,
                            dist.ReduceOp.MAX][o["a"]])
        return t.item() / p if o["a"] == 1 else t.item()

    total_wrong, bw_sum, nbw = 0, 0.0, 0
    for size in sizes(o):
        for tname in o["d"]:
            count = size // esize[tname]
            nbytes = count * esize[tname]
            for op in o["o"]:
                mine, want = tables(tname, op)
                line = "%12d  %12d  %8s  %6s  %6d" % (nbytes, count, tname, op, -1)
                for inplace in (0, 1):
                    send = tile(mine, count)
                    recv = send if inplace else torch.empty_like(send)

                    def call():
                        if not inplace:
                            recv.copy_(send)
                        if ds_allreduce is not None:
                            ds_allreduce(recv)
                        else:
                            dist.all_reduce(recv, rops[op])

                    for _ in range(o["w"]):
                        call()
                    dist.barrier()
                    t0 = time.perf_counter()
                    for _ in range(o["n"]):
                        call()
                    us = combine((time.perf_counter() - t0) * 1e6 / o["n"])
                    algbw = nbytes / us / 1e3 if us > 0 else 0.0
                    busbw = algbw * 2 * (p - 1) / p
                    ts = "%7.0f" % us if us >= 10000 else "%7.1f" % us if us >= 100 else "%7.2f" % us
                    if o["c"]:
                        send = tile(mine, count)
                        recv = send if inplace else torch.empty_like(send)
                        call()
                        bad = int((recv != tile(want, count)).sum())
                        if not inplace:
                            bad += int((send != tile(mine, count)).sum())
                        w = torch.tensor([bad], dtype=torch.int32)
                        dist.all_reduce(w)
                        total_wrong += int(w.item())
                        ws = "%5d" % w.item()
                    else:
                        ws = "%5s" % "N/A"
                    bw_sum += busbw
                    nbw += 1
                    line += "  %7s  %6.2f  %6.2f  %5s" % (ts, algbw, busbw, ws)
                if rank == 0:
                    print(line)
                    sys.stdout.flush()
    if rank == 0:
        print("# Out of bounds values : %d %s" % (total_wrong, "FAILED" if total_wrong else "OK"))
        print("# Avg bus bandwidth    : %g " % (bw_sum / nbw if nbw else 0.0))
        print("#")
        sys.stdout.flush()
    dist.destroy_process_group()
    return 1 if total_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
