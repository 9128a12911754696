#!/usr/bin/env python3
"""multiserver_plot.py - the plot of bench/multiserver.sh's tables: reads the Markdown that
multiserver.sh printed (one row per layout, 2 x 1, 2 x 2, 2 x 4, in each of its two tables) and
draws two panels: busbw at 64 MiB (higher is better) of the link itself (iperf3, each way at
once), the plain allreduce of tcp_plain, libhccl (the cost model's choice, on malloc and on
HcclMemAlloc buffers, and one flat ring), gloo, torch_hccl, Open MPI, MPICH and oneCCL; and the
time at 4 KiB (log scale, lower is better) of libhccl, its flat ring and the anchors. Bars and colours as compare_plot.py draws them (its draw()). Needs
matplotlib (Debian's python3-matplotlib).

    python3 bench/multiserver_plot.py MULTISERVER_OUTPUT.md OUT.png
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_plot import arguments, draw, number  # noqa: E402

# Column headers of multiserver.sh's table (the first of a repeated name is the 64 MiB one)
# and the name each gets on the plot.
BW = [("link (iperf3 each way at once)", "link (iperf3)"),
      ("64 MiB allreduce, no library (tcp_plain)", "tcp_plain"),
      ("hccl two-level busbw 64 MiB", "hccl"), ("`-R 1`", "hccl -R 1"),
      ("flat ring", "hccl flat ring"), ("gloo", "gloo"), ("torch_hccl", "torch_hccl"),
      ("Open MPI", "Open MPI"), ("MPICH", "MPICH"), ("oneCCL", "oneCCL")]
TIME = [("hccl time 4 KiB", "hccl"), ("flat ring", "hccl flat ring"), ("gloo", "gloo"),
        ("Open MPI", "Open MPI"), ("MPICH", "MPICH"), ("oneCCL", "oneCCL")]


def table(path):
    """({layout: {name: busbw}}, {layout: {name: time}}), layouts as (servers, ranks each)."""
    bw, t, head = {}, {}, None
    for line in open(path):
        line = line.strip()
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == "ranks":
            head = cells
            continue
        if head is None or " x " not in cells[0]:
            continue
        s, l = (int(x) for x in cells[0].split(" x "))
        split = head.index("hccl time 4 KiB")
        for out, cols, lo in ((bw, BW, 1), (t, TIME, split)):
            row = out.setdefault((s, l), {})
            for col, name in cols:
                k = head.index(col, lo) if col in head[lo:] else None
                # A busbw column is one before the 4 KiB part.
                if k is not None and (out is t or k < split) and k < len(cells):
                    row[name] = number(cells[k].split()[0])
    return bw, t


def main():
    table_md, out = arguments(__doc__, "multiserver_plot.py", "multiserver.sh")
    bw, t = table(table_md)
    if not bw:
        sys.exit("multiserver_plot.py: no multiserver.sh table in %s" % table_md)
    names = [n for _, n in BW]
    draw(out, names, [(bw, "allreduce busbw at 64 MiB (GB/s, higher is better)", False, None),
                      (t, "allreduce time at 4 KiB (us, lower is better)", True, None)],
         lambda g: "%d x %d" % g)
    print("wrote", out)


if __name__ == "__main__":
    main()
