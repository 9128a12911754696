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

Types: every dtype torch_hccl reduces, by allreduce_perf's names (int8 uint8 int16 uint16 int32
uint32 int64 uint64 half bfloat16 float double; uint16/32/64 where this torch has them, 2.3 on)
and torch's own bool (max, min) and complex64, complex128 (sum, avg). Every (type, op) is
checked bit for bit with allreduce_perf's data (perf/perf_data.c), built with torch in torch_perf_data.py: small
integers whose reductions are exact in every order and type (bool: one rank's true, or false,
per element; complex: the real data in the real part, the data one element on in the
imaginary part). A backend that refuses a (type, op) at the call (gloo has no int16 or unsigned
beyond uint8, and no integer AVG) gets a "# ... skipped" line in the table where -d all or -o
all chose the pair; named with -d and -o both, the refusal is a failed call (exit 1).
"""
import os
import socket
import sys
import time

from torch_perf_data import ESIZE, Data, count_wrong

# The flags: perf/perf_flags.h's table, the one the C programs compile in (perf_flags.py reads
# it), this program's rows (PERF_BY_TORCH) with their usage texts.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "perf"))
import perf_flags  # noqa: E402

PROG = "torch_allreduce_perf"
# allreduce_perf's twelve (perf/perf_data.c), then torch's own bool and complex types.
TYPES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "half",
         "bfloat16", "float", "double", "bool", "complex64", "complex128"]
UNSIGNED_SHELL = ("uint16", "uint32", "uint64")  # torch 2.3 on
OPS = ["sum", "prod", "max", "min", "avg"]
# The ops each kind of type is run with: bool as torch's logical or/and, complex as pairs.
TYPE_OPS = {"bool": ("max", "min"), "complex64": ("sum", "avg"), "complex128": ("sum", "avg")}
AVG = ["rank0", "avg", "min", "max"]
FLAGS = {f["letter"]: f for f in perf_flags.for_program("torch")}
USAGE = "\n".join(
    ["Usage: %s [--backend gloo|hccl|deepspeed-shm] [flags]   (one process per rank; rank 0 "
     "prints)" % PROG,
     "  --backend NAME  gloo, hccl (torch_hccl) or deepspeed-shm; must come first default gloo"]
    + perf_flags.usage_lines(FLAGS.values(), 76)
    + ["allreduce_perf's table and exit codes: 0 ok, 1 wrong results or a failed call, 2 bad "
       "flags.",
       'A (type, op) the backend refuses is a "# ... skipped" line when -d all or -o all chose '
       "it.", ""])


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


def set_flag(o, f, v):
    """Stores the value v of the table's flag f in o[letter] after its kind's check."""
    c = f["letter"]
    if f["kind"] == "SIZE":
        o[c] = parse_size(c, v)
    elif f["kind"] == "INT":
        o[c] = parse_int(c, v, f["lo"], f["hi"])
    elif f["kind"] == "TYPE":
        if v != "all" and v not in TYPES:
            usage_error("-%s '%s' is not a type this benchmark reduces: expected %s or all"
                        % (c, v, ", ".join(TYPES)))
        o[c] = TYPES if v == "all" else [v]
        o["chosen"] = o["chosen"] and v != "all"
    elif f["kind"] == "OP":
        if v != "all" and v not in OPS:
            usage_error("-%s '%s' is not an op: expected sum, prod, max, min, avg or all" % (c, v))
        o[c] = OPS if v == "all" else [v]
        o["chosen"] = o["chosen"] and v != "all"
    elif f["kind"] == "ONE":
        if v != "1":
            usage_error("-%s '%s' is not supported: one device and one thread per process"
                        % (c, v))
    else:  # a kind perf_flags.py knows and this program does not: refused, never ignored
        usage_error("-%s: this program cannot read a flag of kind %s" % (c, f["kind"]))


def parse_args(argv):
    # the table's defaults, read like given values; the sizes' and counts' 0 where it has none
    o = {c: 0 for c, f in FLAGS.items() if f["kind"] in ("SIZE", "INT")}
    o["chosen"] = True
    for f in FLAGS.values():
        if f["default"]:
            set_flag(o, f, f["default"])
    seen = set()
    k = 0
    while k < len(argv):
        a = argv[k]
        f = FLAGS.get("h" if a == "--help" else a[1:] if len(a) == 2 and a[0] == "-" else None)
        if f is None:
            usage_error("unknown flag %s" % a if a.startswith("-") else
                        "unexpected argument '%s': every setting is a flag with a value" % a)
        if f["kind"] == "HELP":
            sys.stdout.write(USAGE)
            sys.exit(0)
        if k + 1 >= len(argv):
            usage_error("flag %s needs a value" % a)
        v = argv[k + 1]
        k += 2
        seen.add(f["letter"])
        set_flag(o, f, v)
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
    if len(o["d"]) == 1 and len(o["o"]) == 1 and o["o"][0] not in TYPE_OPS.get(o["d"][0], OPS):
        usage_error("-d %s -o %s: %s reduces with %s here" % (
            o["d"][0], o["o"][0], o["d"][0], " and ".join(TYPE_OPS[o["d"][0]])))
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

    missing = [d for d in UNSIGNED_SHELL if not hasattr(torch, d)]
    if o["chosen"] and o["d"][0] in missing:
        usage_error("-d '%s' is not a dtype of torch %s (uint16, uint32 and uint64 came in 2.3)"
                    % (o["d"][0], torch.__version__))
    o["d"] = [d for d in o["d"] if d not in missing]
    rops = {"sum": dist.ReduceOp.SUM, "prod": dist.ReduceOp.PRODUCT, "max": dist.ReduceOp.MAX,
            "min": dist.ReduceOp.MIN, "avg": dist.ReduceOp.AVG}
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
    def tile(data, tab, count):  # count elements of the periodic table, in the type
        reps = (count + period - 1) // period
        return tab.repeat(max(reps, 1))[:count].clone().view(data.dtype)

    def combine(us):
        if o["a"] == 0:
            return us
        t = torch.tensor([us], dtype=torch.float32)
        dist.all_reduce(t, [dist.ReduceOp.SUM, dist.ReduceOp.SUM, dist.ReduceOp.MIN,
                            dist.ReduceOp.MAX][o["a"]])
        return t.item() / p if o["a"] == 1 else t.item()

    def refusal(data, op):
        """None when the backend takes (type, op), else its one-line reason. Every rank
        checks the same dtype and op locally before communicating, so all refuse alike."""
        t = tile(data, data.mine, 1)
        try:
            if ds_allreduce is not None:
                ds_allreduce(t)
            else:
                dist.all_reduce(t, rops[op])
            return None
        except Exception as e:  # RuntimeError, ValueError, ... as each backend raises it
            why = "%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or [""])[0])
            return why if len(why) <= 120 else why[:117] + "..."

    total_wrong, bw_sum, nbw, refused = 0, 0.0, 0, {}
    for size in sizes(o):
        for tname in o["d"]:
            count = size // ESIZE[tname]
            nbytes = count * ESIZE[tname]
            for op in o["o"]:
                if op not in TYPE_OPS.get(tname, OPS):
                    continue
                data = Data(torch, tname, op, rank, p)
                if (tname, op) not in refused:
                    refused[(tname, op)] = why = refusal(data, op)
                    if why and o["chosen"]:
                        sys.stderr.write("%s: rank %d: allreduce of %s with %s on %s failed: %s\n"
                                         % (PROG, rank, tname, op, backend, why))
                        sys.exit(1)
                    if why and rank == 0:
                        print("# %s %s: skipped: %s refuses it (%s)" % (tname, op, backend, why))
                if refused[(tname, op)]:
                    continue
                mine, want = data.mine, data.want
                line = "%12d  %12d  %8s  %6s  %6d" % (nbytes, count, tname, op, -1)
                for inplace in (0, 1):
                    send = tile(data, mine, count)
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
                        send = tile(data, mine, count)
                        recv = send if inplace else torch.empty_like(send)
                        call()
                        bad = count_wrong(torch, recv, tile(data, want, count))
                        if not inplace:
                            bad += count_wrong(torch, send, tile(data, mine, count))
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
