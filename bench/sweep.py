#!/usr/bin/python3
"""sweep.py - libhccl's allreduce against every anchor on this machine, over the whole size
range, in one run: the comparison docs/performance.md reports.

    /usr/bin/python3 bench/sweep.py [--build build] [--ranks 2,4,8] [--repeats 3]
                                    [--min 1K] [--max 256M] [--out DIR] [--only hccl,gloo,...]
                                    [--resume]

For each group size it runs, float sum, one process per rank, each program under its own
launcher's default binding:
  hccl          build/bin/allreduce_perf under build/bin/npu-launch (binds rank r to CPU r)
  hccl-R1       the same with -R 1: buffers from HcclMemAlloc, so the zero-copy path runs
  ompi          build/bin/mpi_allreduce_perf under Open MPI's mpirun, default binding
  ompi-unbound  the same with --bind-to none
  mpich         bench/mpi_allreduce_perf.c built with mpicc.mpich, under mpirun.mpich (only
                when Debian's mpich is installed)
  gloo          bench/torch_allreduce_perf.py --backend gloo, unbound as under torchrun
                (npu-launch --cpu-bind none: Debian's torchrun fails to start on Python 3.11)
MPI runs get --mca mpi_yield_when_idle 1 (Open MPI) when ranks outnumber cores, as a
busy-polling rank otherwise takes the core its peer needs.

Every program sees the same sizes (powers of 4 from --min to --max) and the same iteration
counts, by size: 500 up to 256 KiB (-w 20), 100 up to 4 MiB (-w 5), 20 up to 16 MiB (-w 2) and
5 above (-w 1). Each point is the median of --repeats runs. Every run checks its results
(-c 1); a wrong element or a failed run makes the point n/a. Columns: out-of-place for the C
programs; in-place for gloo (torch's allreduce is in place; its out-of-place twin adds a copy).

The memory limit is measured in the same run: bench/membw.c copies with one thread per core
and gives the bytes copied per second (B). An allreduce must at least read each rank's input
once and write each output once, so algbw <= B / (2p), and busbw <= B / (2p) * 2(p-1)/p.

--resume reuses the raw output a killed sweep left in --out DIR for every run that succeeded,
and runs the rest.

Writes DIR/results.json, DIR/table.md (printed too) and DIR/busbw.png (one panel per group
size, busbw against size, a line per library, the memory limit dashed).
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def human(b):
    for unit, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= m:
            return "%d%s" % (b // m, unit)
    return str(b)


def iterations(size):
    if size <= 256 << 10:
        return 500, 20
    if size <= 4 << 20:
        return 100, 5
    if size <= 16 << 20:
        return 20, 2
    return 5, 1


def free_port():
    s = socket.socket()
    s.bind(("", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def parse_table(text, inplace):
    """{size: (time_us, busbw)} from an allreduce_perf-shaped table (float sum lines)."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 13 and f[2] == "float" and f[3] == "sum" and f[0].isdigit():
            o = 4 if inplace else 0
            try:
                out[int(f[0])] = (float(f[5 + o]), float(f[7 + o]))
            except ValueError:
                pass
    return out


class Lib:
    def __init__(self, name, cmd, inplace=False):
        self.name, self.cmd, self.inplace = name, cmd, inplace


def libraries(build, cores, only):
    bin_ = os.path.join(build, "bin")
    libs = []

    def launch_hccl(n, flags):
        return [os.path.join(bin_, "npu-launch"), "--device-list", "0-%d" % (n - 1),
                "--master-port", str(free_port()), "--",
                os.path.join(bin_, "allreduce_perf")] + flags

    libs.append(Lib("hccl", launch_hccl))
    # The same program with its buffers from HcclMemAlloc (-R 1): zero-copy inside a server.
    libs.append(Lib("hccl-R1", lambda n, flags: launch_hccl(n, flags + ["-R", "1"])))
    mpi = os.path.join(bin_, "mpi_allreduce_perf")
    mpirun = shutil.which("mpirun.openmpi") or shutil.which("mpirun")
    if os.access(mpi, os.X_OK) and mpirun:
        def ompi(bound):
            def cmd(n, flags):
                c = [mpirun, "--allow-run-as-root", "-np", str(n)]
                if n > cores:
                    c += ["--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]
                if not bound:
                    c += ["--bind-to", "none"]
                return c + [mpi] + flags
            return cmd
        libs.append(Lib("ompi", ompi(True)))
        libs.append(Lib("ompi-unbound", ompi(False)))
    mpicc, mpirun_m = shutil.which("mpicc.mpich"), shutil.which("mpirun.mpich")
    if mpicc and mpirun_m:
        exe = os.path.join(tempfile.mkdtemp(prefix="hccl-mpich."), "mpich_allreduce_perf")
        subprocess.run([mpicc, "-O2", "-I", os.path.join(ROOT, "perf"), "-o", exe,
                        os.path.join(HERE, "mpi_allreduce_perf.c")] +
                       [os.path.join(ROOT, "perf", f) for f in
                        ("perf_common.c", "perf_coll.c", "perf_data.c")] + ["-lm"], check=True)
        libs.append(Lib("mpich", lambda n, flags: [mpirun_m, "-np", str(n), exe] + flags))
    if subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                      capture_output=True).returncode == 0:
        def gloo(n, flags):
            # torchrun binds nothing; Debian's (torch 1.13 on Python 3.11) fails at start in
            # elastic's to_map, so npu-launch starts the ranks, unbound as torchrun would.
            return [os.path.join(bin_, "npu-launch"), "--device-list", "0-%d" % (n - 1),
                    "--master-port", str(free_port()), "--cpu-bind", "none", "--",
                    "/usr/bin/python3", os.path.join(HERE, "torch_allreduce_perf.py"),
                    "--backend", "gloo"] + flags
        libs.append(Lib("gloo", gloo, inplace=True))
    if only:
        libs = [l for l in libs if l.name in only]
    return libs


def run(cmd, timeout):
    """(output, exit code) of one benchmark run; a run past timeout gives -1."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return r.stdout + r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        return str(e), -1


def membw(outdir, cores):
    exe = os.path.join(outdir, "membw")
    subprocess.run(["cc", "-O2", "-pthread", "-o", exe, os.path.join(HERE, "membw.c")],
                   check=True)
    r = subprocess.run([exe, str(cores)], capture_output=True, text=True, check=True)
    return float(r.stdout.split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--min", default="1K")
    ap.add_argument("--max", default="256M")
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--timeout", type=int, default=600)
    ap.add_argument("--resume", action="store_true",
                    help="reuse the raw output of runs in --out that succeeded (a killed sweep)")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="hccl-sweep.")
    os.makedirs(out, exist_ok=True)
    cores = os.cpu_count() or 1
    ranks = [int(x) for x in a.ranks.split(",")]
    sizes = []
    s = parse_size(a.min)
    while s <= parse_size(a.max):
        sizes.append(s)
        s *= 4
    libs = libraries(a.build, cores, set(filter(None, a.only.split(","))))
    print("libraries: %s; raw output in %s" % (", ".join(l.name for l in libs), out), flush=True)
    start = time.time()
    bw = membw(out, cores)
    print("memory: %d cores copy %.2f GB/s together" % (cores, bw), flush=True)

    # Size groups that share an iteration count run as one sweep.
    groups = {}
    for s in sizes:
        groups.setdefault(iterations(s), []).append(s)
    results = {}  # results[n][lib][size] = (time, busbw) medians, or None
    for n in ranks:
        results[n] = {}
        for lib in libs:
            per = {s: [] for s in sizes}
            failed = set()
            for rep in range(a.repeats):
                for (iters, warm), ss in sorted(groups.items()):
                    flags = ["-d", "float", "-o", "sum", "-b", str(ss[0]), "-e", str(ss[-1]),
                             "-f", "4", "-n", str(iters), "-w", str(warm), "-c", "1"]
                    log = os.path.join(out, "%s.np%d.%s-%s.%d.txt" % (
                        lib.name, n, human(ss[0]), human(ss[-1]), rep))
                    text = None
                    if a.resume and os.path.exists(log):
                        text = open(log).read()
                        if "Out of bounds values : 0 OK" not in text:
                            text = None
                    if text is not None:
                        rc = 0
                    else:
                        text, rc = run(lib.cmd(n, flags), a.timeout)
                        with open(log, "w") as f:
                            f.write(text)
                    ok = rc == 0 and "Out of bounds values : 0 OK" in text
                    got = parse_table(text, lib.inplace) if ok else {}
                    for s in ss:
                        if s in got:
                            per[s].append(got[s])
                        else:
                            failed.add(s)
                    if not ok:
                        print("  %s np%d %s-%s failed (rc %d): %s" % (
                            lib.name, n, human(ss[0]), human(ss[-1]), rc, log), flush=True)
            results[n][lib.name] = {
                s: None if s in failed or not per[s] else
                (statistics.median(t for t, _ in per[s]), statistics.median(b for _, b in per[s]))
                for s in sizes}
            print("  np%d %s done (%.0f s)" % (n, lib.name, time.time() - start), flush=True)

    doc = {"cores": cores, "copy_GBps": bw, "repeats": a.repeats, "sizes": sizes,
           "load": open("/proc/loadavg").read().split()[:3],
           "date": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime()),
           "results": {str(n): {l: {str(s): v for s, v in d.items()} for l, d in r.items()}
                       for n, r in results.items()}}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    table = render(doc, [l.name for l in libs])
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(table)
    print(table)
    plot(doc, [l.name for l in libs], os.path.join(out, "busbw.png"))
    print("took %.0f s; %s/{results.json,table.md,busbw.png}" % (time.time() - start, out))


def limit(doc, n):
    return doc["copy_GBps"] / (2 * n) * 2 * (n - 1) / n


def render(doc, names):
    anchors = [x for x in names if not x.startswith("hccl")]
    lines = ["allreduce, float sum, busbw in GB/s (time in us at 4 KiB); %d cores copying %.2f "
             "GB/s; median of %d runs; %s; load average at the end %s." % (
                 doc["cores"], doc["copy_GBps"], doc["repeats"], doc["date"],
                 " ".join(doc["load"])), ""]
    summary = ["| ranks | hccl | busbw 64 MiB | best anchor | ratio | % of memory limit | "
               "hccl 4 KiB | best anchor | ratio | sizes where an anchor is faster |",
               "| ---: | --- | ---: | --- | ---: | ---: | ---: | --- | ---: | --- |"]
    for (n, r), hname in [(item, x) for item in doc["results"].items()
                          for x in names if x.startswith("hccl")]:
        n = int(n)
        h = r.get(hname, {})

        def best(size, col):
            vals = [(r[x][str(size)][col], x) for x in anchors if r[x].get(str(size))]
            if not vals:
                return None, "n/a"
            return (max(vals) if col == 1 else min(vals))

        def cell(v, col):
            return "n/a" if not v else "%.2f" % v[col]

        big, small = 64 << 20, 4 << 10
        hb = h.get(str(big))
        bb, bn = best(big, 1)
        ht = h.get(str(small))
        bt, tn = best(small, 0)
        slower = []
        for s in doc["sizes"]:
            hv = h.get(str(s))
            bv, _ = best(s, 1)
            if hv and bv and bv > hv[1]:
                slower.append(human(s))
        summary.append("| %d | %s | %s | %s %s | %s | %s | %s | %s %s | %s | %s |" % (
            n, hname, cell(hb, 1), "n/a" if bb is None else "%.2f" % bb, bn,
            "n/a" if not hb or not bb else "%.2f" % (hb[1] / bb),
            "n/a" if not hb else "%.0f%% of %.2f" % (100 * hb[1] / limit(doc, n), limit(doc, n)),
            cell(ht, 0), "n/a" if bt is None else "%.2f" % bt, tn,
            "n/a" if not ht or not bt else "%.2f" % (ht[0] / bt),
            ", ".join(slower) or "none"))
    lines += summary + [""]
    for n, r in doc["results"].items():
        lines.append("%s ranks (memory limit %.2f GB/s busbw):" % (n, limit(doc, int(n))))
        lines.append("")
        lines.append("| size | " + " | ".join(names) + " |")
        lines.append("| ---: |" + " ---: |" * len(names))
        for s in doc["sizes"]:
            row = []
            for x in names:
                v = r[x].get(str(s))
                row.append("n/a" if not v else "%.3g" % v[1])
            lines.append("| %s | %s |" % (human(s), " | ".join(row)))
        lines.append("")
    return "\n".join(lines) + "\n"


def plot(doc, names, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing (python3-matplotlib): no plot")
        return
    ns = list(doc["results"])
    fig, axes = plt.subplots(1, len(ns), figsize=(5 * len(ns), 4), squeeze=False)
    for ax, n in zip(axes[0], ns):
        r = doc["results"][n]
        for x in names:
            pts = [(s, r[x][str(s)][1]) for s in doc["sizes"] if r[x].get(str(s))]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=x,
                        linewidth=2.2 if x.startswith("hccl") else 1.2)
        ax.axhline(limit(doc, int(n)), linestyle="--", color="grey",
                   label="memory limit (past the caches)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(doc["sizes"])
        ax.set_xticklabels([human(s) for s in doc["sizes"]], rotation=45, fontsize=7)
        ax.set_title("%s ranks" % n)
        ax.set_xlabel("bytes")
        ax.set_ylabel("busbw GB/s")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
