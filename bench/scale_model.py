#!/usr/bin/env python3
"""scale_model.py - docs/scaling.md's projection: init and allreduce time at n ranks (D a
server) from constants measured on this machine, for the designs the library has had and has.

    python3 bench/scale_model.py [--alpha-tcp US] [--beta-tcp NS] [--alpha-shm US]
        [--beta-shm NS] [--connect MS] [--request US] [--record B] [--store-gbs GB/s]

Constants (defaults: measured here, docs/scaling.md says how):
  alpha_tcp  one message hop between servers (us)        beta_tcp  one byte between servers (ns)
  alpha_shm  one hop inside a server (us)                beta_shm  one byte inside (ns)
  connect    making one TCP link (ms)                    request   one store request (us)
  record     one rank's bootstrap record (bytes)         store_gbs what rank 0's store sends
  served     bytes rank 0's store serves a rank with the tree of sockets (bench/scale.sh's B_per_rk)
The bootstrap over a tree of sockets (now): the store serves `served` bytes and 4 requests a
rank (its tree record SET, its parent's GET, the "done" mark and rank 0's read of it); each
round ("info" and "conn" of `record` bytes, "ready" of 4) gathers up a binomial tree (log2 n
hops, the whole table into rank 0) and sends the whole down it (log2 n sends of the table on
the critical path, largest subtree first).
Allreduce forms of n bytes over p = S x L ranks (the same as algo/plan.c's):
  flat ring          2(p-1) a_tcp + 2(p-1)/p n b_tcp
  two-level + X      2[(L-1) a_shm + (L-1)/L n b_shm] + X over S servers of n/L bytes
    ring             2(S-1) a + 2(S-1)/S m b
    halving-doubling 2 log2(S) a + 2(S-1)/S m b x 1.5, or log2(S)(a + m b) for m <= a slot
    tree             2 log2(S)(a + m b)     (binomial reduce, then broadcast; small m)
"""
import argparse
import math

SLOT = 512 << 10


def lg(x):
    return math.ceil(math.log2(x)) if x > 1 else 0


def forms(c, p, L, n):
    S = p // L
    a, b = c.alpha_tcp * 1e3, c.beta_tcp  # ns
    al, bl = c.alpha_shm * 1e3, c.beta_shm
    local = 2 * ((L - 1) * al + (L - 1) / L * n * bl) if L > 1 else 0
    m = n / L
    ring = 2 * (S - 1) * a + 2 * (S - 1) / S * m * b
    hd = (lg(S) * (a + m * b) if m <= SLOT else
          2 * lg(S) * a + 2 * (S - 1) / S * m * b * 1.5)
    tree = 2 * lg(S) * (a + m * b)
    out = {
        "flat ring": 2 * (p - 1) * a + 2 * (p - 1) / p * n * b,
        "two-level ring": local + ring,
        "two-level H-D": local + hd,
        "two-level tree": local + tree,
    }
    # What algo/plan.c picks: the cheaper of flat ring/H-D and two-level with its best
    # cross-server form (ring or H-D; the tree is not one of its choices).
    flat_hd = (lg(p) * (a + n * b) if n <= SLOT else
               2 * lg(p) * a + 2 * (p - 1) / p * n * b * 1.5)
    cands = {"flat ring": out["flat ring"], "flat H-D": flat_hd,
             "two-level ring": out["two-level ring"], "two-level H-D": out["two-level H-D"]}
    pick = min(cands, key=cands.get)
    return out, pick, cands[pick]


def tree_round(c, p, rec):
    table = p * rec * c.beta_tcp * 1e-9  # s, one table over one link
    return 2 * lg(p) * c.alpha_tcp * 1e-6 + table + lg(p) * table


def init_tree(c, p):
    """(store requests s, store bytes s, tree rounds s) of the bootstrap over a tree."""
    rounds = 2 * tree_round(c, p, c.record) + tree_round(c, p, 4)
    return 4 * p * c.request * 1e-6, p * c.served / (c.store_gbs * 1e9), rounds


def init(c, p, L, mesh):
    S = p // L
    links = 2 * (p - p // S) if mesh else 2 * lg(p) + 2  # partners at +-2^k, H-D, cross group
    store_req = (3 * p * p if mesh else 12 * p) * c.request * 1e-6
    store_bytes = 2 * p * p * c.record / (c.store_gbs * 1e9)  # "info" and "conn" tables
    return links, links * c.connect * 1e-3, store_req, store_bytes


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--alpha-tcp", type=float, default=50.0)
    ap.add_argument("--beta-tcp", type=float, default=1.2)
    ap.add_argument("--alpha-shm", type=float, default=3.7)
    ap.add_argument("--beta-shm", type=float, default=0.16)
    ap.add_argument("--connect", type=float, default=0.5)
    ap.add_argument("--request", type=float, default=80.0)
    ap.add_argument("--record", type=float, default=384.0)
    ap.add_argument("--store-gbs", type=float, default=1.25)
    ap.add_argument("--served", type=float, default=233.0)
    c = ap.parse_args()
    shapes = [(128, 1), (1000, 8), (8000, 8)]
    big = [(128, 1), (1000, 8), (8000, 8), (32000, 8), (100000, 8)]

    print("## Init at n ranks (D a server)\n")
    print("| n | D | design | links / rank | links s | store requests s | store bytes s |")
    print("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for p, L in shapes:
        for mesh, name in ((True, "full mesh, flat rounds"), (False, "partners, tree rounds")):
            links, ls, rq, by = init(c, p, L, mesh)
            print("| %d | %d | %s | %d | %.3g | %.3g | %.3g |" % (p, L, name, links, ls, rq, by))

    print("\n## Init's store and rounds with the tree of sockets, to 100,000 ranks\n")
    print("| n | D | links / rank | links s | store requests s | store bytes | store bytes s "
          "| tree rounds s | before: store bytes s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for p, L in big:
        links, ls, _, before = init(c, p, L, False)
        rq, by, tr = init_tree(c, p)
        print("| %d | %d | %d | %.3g | %.3g | %.3g | %.3g | %.3g | %.3g |" % (
            p, L, links, ls, rq, p * c.served, by, tr, before))

    print("\n## Allreduce at n ranks (ms)\n")
    sizes = [(4 << 10, "4 KiB"), (1 << 20, "1 MiB"), (64 << 20, "64 MiB")]
    hdr = ["flat ring", "two-level ring", "two-level H-D", "two-level tree"]
    print("| n | D | bytes | " + " | ".join(hdr) + " | the cost model picks |")
    print("| ---: | ---: | ---: | " + " | ".join(["---:"] * len(hdr)) + " | --- |")
    for p, L in shapes:
        for n, label in sizes:
            out, pick, cost = forms(c, p, L, n)
            print("| %d | %d | %s | %s | %s (%.3g) |" % (
                p, L, label, " | ".join("%.3g" % (out[h] / 1e6) for h in hdr), pick, cost / 1e6))


if __name__ == "__main__":
    main()
