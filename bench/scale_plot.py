#!/usr/bin/env python3
"""scale_plot.py - the plot and the fit of bench/scale.sh's table, with no library beyond
Python's own: reads the rows scale.sh printed (servers D ranks wall_s init_ms first_call_ms
sockets others rss_kib), writes an SVG of three panels against the number of ranks n (init
time, sockets per rank, resident size per rank; one line per devices-per-server D), and prints
how init time grows: the least-squares slope of log(init) against log(n) per D (1 would be
linear, n log n shows as a slope a little above 1 that falls as n grows), and init / (n log2 n)
at each n (flat or falling = no faster than n log n).

    python3 bench/scale_plot.py TABLE.txt OUT.svg
"""
import argparse
import math
import sys


def rows(path):
    out = []
    for line in open(path):
        f = line.split()
        if len(f) >= 9 and f[0].isdigit() and f[1].isdigit():  # scale.sh adds columns after
            s, d, n = int(f[0]), int(f[1]), int(f[2])
            out.append(dict(servers=s, d=d, n=n, init=float(f[4]), first=float(f[5]),
                            sockets=int(f[6]), others=int(f[7]), rss=int(f[8])))
    return out


def slope(pts):
    xs = [math.log(x) for x, _ in pts]
    ys = [math.log(y) for _, y in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def panel(x0, w, h, title, series, ylabel):
    """One panel: series = [(label, [(n, y)])], log2 x axis, linear y from 0."""
    ns = sorted({n for _, pts in series for n, _ in pts})
    ymax = max(y for _, pts in series for _, y in pts) * 1.1 or 1
    lo, hi = math.log2(ns[0]), math.log2(ns[-1])
    left, top, pw, ph = x0 + 55, 40, w - 75, h - 90

    def px(n):
        return left + (math.log2(n) - lo) / ((hi - lo) or 1) * pw

    def py(y):
        return top + ph - y / ymax * ph

    svg = ['<text x="%d" y="22" font-size="14" text-anchor="middle">%s</text>' %
           (left + pw / 2, title),
           '<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>' %
           (left, top, pw, ph)]
    for i in range(5):
        y = ymax * i / 4
        svg.append('<text x="%d" y="%.1f" font-size="10" text-anchor="end">%.3g</text>' %
                   (left - 4, py(y) + 3, y))
        svg.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' %
                   (left, left + pw, py(y), py(y)))
    for n in ns:
        svg.append('<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%d</text>' %
                   (px(n), top + ph + 14, n))
    svg.append('<text x="%d" y="%d" font-size="11" text-anchor="middle">ranks n</text>' %
               (left + pw / 2, top + ph + 30))
    svg.append('<text x="%d" y="%d" font-size="11" transform="rotate(-90 %d %d)" '
               'text-anchor="middle">%s</text>' % (x0 + 14, top + ph / 2, x0 + 14, top + ph / 2,
                                                   ylabel))
    for k, (label, pts) in enumerate(series):
        c = COLORS[k % len(COLORS)]
        path = " ".join("%.1f,%.1f" % (px(n), py(y)) for n, y in sorted(pts))
        svg.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>' % (path, c))
        for n, y in pts:
            svg.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (px(n), py(y), c))
        svg.append('<text x="%d" y="%d" font-size="11" fill="%s">%s</text>' %
                   (left + 8, top + 16 + 14 * k, c, label))
    return svg


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("table", help="the table bench/scale.sh printed")
    ap.add_argument("svg", help="the SVG to write")
    args = ap.parse_args()
    data = rows(args.table)
    if not data:
        sys.exit("no table rows in " + args.table)
    ds = sorted({r["d"] for r in data})

    def series(key):
        return [("D = %d" % d, [(r["n"], r[key]) for r in data if r["d"] == d]) for d in ds]

    w, h = 360, 300
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif">' % (3 * w, h),
           '<rect width="100%" height="100%" fill="white"/>']
    svg += panel(0, w, h, "init time (slowest rank)", series("init"), "ms")
    svg += panel(w, w, h, "sockets per rank (not rank 0)", series("others"), "sockets")
    svg += panel(2 * w, w, h, "resident size per rank", series("rss"), "KiB")
    svg.append("</svg>")
    with open(args.svg, "w") as f:
        f.write("\n".join(svg) + "\n")

    for d in ds:
        pts = [(r["n"], r["init"]) for r in data if r["d"] == d]
        if len(pts) >= 2:
            print("# D = %d: init ~ n^%.2f (least squares over n = %s)" %
                  (d, slope(pts), ", ".join(str(n) for n, _ in pts)))
        print("# D = %d: init / (n log2 n) in us: %s" % (d, ", ".join(
            "%d: %.0f" % (n, 1000 * y / (n * math.log2(n))) for n, y in pts if n > 1)))
    print("# plot: " + args.svg)


if __name__ == "__main__":
    main()
