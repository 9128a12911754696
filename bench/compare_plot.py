#!/usr/bin/env python3
"""compare_plot.py - the plot of bench/compare.sh's anchors tables: reads the Markdown that
compare.sh printed (its two "against the anchors" tables: busbw at 64 MiB with the memory limit,
time at 4 KiB) and draws two panels, busbw at 64 MiB (higher is better; the memory limit B/p x
2(p-1)/p as a line over each rank count) and time at 4 KiB (log scale, lower is better), one
bar per library and rank count. A cell that is not a number (an anchor that could not run) gets
no bar. Needs matplotlib (Debian's python3-matplotlib).

    python3 bench/compare_plot.py COMPARE_OUTPUT.md OUT.png
"""
import argparse
import sys

LIBS = ["hccl", "hccl -R 1", "Open MPI", "MPICH", "oneCCL", "DeepSpeed shm", "gloo"]


def number(cell):
    try:
        return float(cell.strip())
    except ValueError:
        return None


def tables(path):
    """The two anchors tables as {ranks: {column: value}}: busbw (with 'memory limit') and
    time."""
    bw, t, cur, head = {}, {}, None, None
    for line in open(path):
        line = line.strip()
        if not line.startswith("|"):
            cur = None
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] == "ranks":
            head = cells
            cur = bw if cells[1] == "hccl busbw@64MiB" else t if cells[1] == "hccl time@4KiB" else None
            continue
        if cur is None or not cells[0].isdigit():
            continue
        row = {}
        for name, cell in zip(head, cells):
            key = "hccl" if name.startswith("hccl ") and "@" in name else name
            row[key] = number(cell)
        cur[int(cells[0])] = row
    return bw, t


def draw(out, libs, panels, label):
    """Writes out (a PNG): one panel per (data, title, log scale, extra) in panels, data as
    {group: {lib: value}}, one bar per lib and group (none where the value is missing; a lib
    with no value in a panel gets no place there, and keeps its colour across panels), groups
    in sorted order named by label(group); extra(ax, groups) adds to a panel. Shared with
    multiserver_plot.py."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("%s: matplotlib missing (apt-get install python3-matplotlib)" % sys.argv[0])
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5))
    for ax, (data, title, log, extra) in zip(axes, panels):
        groups = sorted(data)
        shown = [lib for lib in libs if any((data[n].get(lib) or 0) > 0 for n in groups)]
        width = 0.8 / max(len(shown), 1)
        for k, lib in enumerate(shown):
            xs, ys = [], []
            for i, n in enumerate(groups):
                v = data[n].get(lib)
                if v is not None and v > 0:
                    xs.append(i + (k - len(shown) / 2 + 0.5) * width)
                    ys.append(v)
            ax.bar(xs, ys, width, label=lib, color="C%d" % libs.index(lib))
        if extra:
            extra(ax, groups)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([label(n) for n in groups])
        ax.set_title(title)
        if log:
            ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def arguments(doc, prog, script):
    """(TABLE, OUT) from the command line of prog, which plots script's output (shared with
    multiserver_plot.py); an unknown option or a missing argument is refused."""
    ap = argparse.ArgumentParser(prog=prog, description=doc.splitlines()[0])
    ap.add_argument("table", nargs="?")
    ap.add_argument("out", nargs="?")
    a, extra = ap.parse_known_args()
    if extra:
        ap.error("unknown option '%s'; see %s --help" % (extra[0], prog))
    if not a.table or not a.out:
        ap.error("give the %s output and the PNG to write: %s TABLE OUT" % (script, prog))
    return a.table, a.out


def main():
    table, out = arguments(__doc__, "compare_plot.py", "compare.sh")
    bw, t = tables(table)
    if not t:
        sys.exit("compare_plot.py: no anchors table in %s" % table)

    def limits(ax, ranks):
        for i, n in enumerate(ranks):
            lim = bw[n].get("memory limit")
            if lim:
                ax.hlines(lim, i - 0.45, i + 0.45, colors="black", linestyles="dashed",
                          label="memory limit" if i == 0 else None)

    draw(out, LIBS, [(bw, "busbw at 64 MiB (GB/s, higher is better)", False, limits),
                     (t, "time at 4 KiB (us, lower is better)", True, None)],
         lambda n: "%d ranks" % n)
    print("wrote", out)


if __name__ == "__main__":
    main()
