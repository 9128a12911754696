#!/usr/bin/python3
"""test_ops.py - every torch.distributed operation on backend hccl, checked against values
each rank computes for itself, at world sizes 1, 2, 4 and 8 (real processes).

Reductions: the card's int8, int32, float16, float32, and the types torch users reduce
beyond them (uint8, int16, int64, float64, bfloat16, bool, and torch 2.x's uint16, uint32,
uint64: torch_hccl/csrc/reduce_route.hpp; complex64 and complex128 at 4 KiB, with a 2-D
float32, checked to reach the library without a staging copy)
x SUM, PRODUCT, MIN, MAX, AVG (not bool) and BAND, BOR, BXOR (integer types and bool) x sizes
0, 1, 7, 33333 and one large size, contiguous and non-contiguous; all_reduce, reduce and both
reduce-scatters. Byte-moving operations also run on int64, float64, bool and bfloat16. Every
operation is also run with async_op=True through Work.wait / is_completed / get_future.
Inputs are integers small enough that every result is exact in every dtype (integer
wrap-around included, as C does it; AVG on integers divides the wrapped sum, rounding toward
zero, as NCCL's).
"""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dist_harness as H  # noqa: E402

CARD_TYPES = ["int8", "int32", "float16", "float32"]
RED_TYPES = CARD_TYPES + ["uint8", "int16", "int64", "float64", "bfloat16", "bool"]
MOVE_TYPES = CARD_TYPES + ["int64", "float64", "bool", "bfloat16"]
SIZES = [0, 1, 7, 33333]
LARGE = (1 << 20) + 3


def ops_case():
    import torch
    import torch.distributed as dist
    from torch.distributed import ReduceOp
    rank, n = H.init()
    checks = [0]

    def dt(name):
        return getattr(torch, name)

    def value(r, count, dtype, op=None):
        """Rank r's input: small integers, exact everywhere; products stay in {-1, 1, 2}."""
        i = torch.arange(count, dtype=torch.int64)
        if op == "PRODUCT":
            v = torch.where((i + r) % 3 == 0, 2, torch.where((i + r) % 3 == 1, -1, 1))
        else:
            v = (i * 7 + r * 3) % 11 - 5
        if dtype == torch.bool:
            return (v > 0)
        return v.to(dtype)

    def expect_reduce(count, dtype, op):
        """The group's result, folded here from every rank's input in a wide type, then cast
        back (so integer results wrap as C's do)."""
        vals = [value(r, count, dtype, op) for r in range(n)]
        if dtype == torch.bool:
            vs = torch.stack(vals) if count else torch.zeros((n, 0), dtype=torch.bool)
            if op in ("SUM", "MAX", "BOR"):
                return vs.any(0)
            if op in ("PRODUCT", "MIN", "BAND"):
                return vs.all(0)
            return vs.to(torch.int64).sum(0).remainder(2).to(torch.bool)  # BXOR
        wide = torch.float64 if dtype.is_floating_point else torch.int64
        vs = torch.stack([v.to(wide) for v in vals]) if count else torch.zeros((n, 0), dtype=wide)
        if op in ("SUM", "AVG"):
            e = vs.sum(0)
        elif op == "PRODUCT":
            e = vs.prod(0)
        elif op == "MIN":
            e = vs.min(0).values if count else vs.sum(0)
        elif op == "MAX":
            e = vs.max(0).values if count else vs.sum(0)
        else:
            e = vs[0].clone()
            for v in vs[1:]:
                e = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or,
                     "BXOR": torch.bitwise_xor}[op](e, v)
        if op == "AVG":
            # integers: the sum wraps in the type first (torch's own arithmetic and NCCL's do)
            e = e / n if dtype.is_floating_point else torch.div(e.to(dtype).to(wide), n,
                                                                rounding_mode="trunc")
        return e.to(dtype)  # int8 and uint8 wrap as C does

    def ops_for(tname):
        o = ops + ([] if tname == "bool" else ["AVG"])
        return o + ([] if tname.startswith(("float", "bfloat")) else ["BAND", "BOR", "BXOR"])

    def same(got, want, what):
        checks[0] += 1
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            bad = (got != want).nonzero()[:5].flatten().tolist() if got.shape == want.shape else []
            raise AssertionError("rank %d: %s: got %s... want %s... (first bad %s)" % (
                rank, what, got.flatten()[:8].tolist(), want.flatten()[:8].tolist(), bad))

    def noncontig(t):
        """A non-contiguous tensor with t's values (every other element of a larger one)."""
        big = torch.zeros(t.numel() * 2, dtype=t.dtype)
        v = big[::2]
        v.copy_(t)
        assert not v.is_contiguous() or t.numel() <= 1
        return v

    def run(fn, asyncly):
        """Calls an operation blocking, or async and then waits through one of Work's ways.
        (Work.exception() cannot be called from Python in torch 1.13, for any backend.)"""
        if not asyncly:
            fn(False)
            return
        w = fn(True)
        mode = checks[0] % 3
        if mode == 0:
            assert w.wait()
        elif mode == 1:
            w.get_future().wait()
            assert w.is_completed()
        else:
            while not w.is_completed():
                pass
            w.wait()

    ops = ["SUM", "PRODUCT", "MIN", "MAX"]
    # all_reduce and reduce: dtype x op x size, blocking and async, contiguous and not.
    for tname in RED_TYPES:
        dtype = dt(tname)
        for op in ops_for(tname):
            for k, count in enumerate(SIZES):
                a = (k % 2) == 1
                t = value(rank, count, dtype, op)
                run(lambda asy: dist.all_reduce(t, op=getattr(ReduceOp, op), async_op=asy), a)
                same(t, expect_reduce(count, dtype, op), "all_reduce %s %s %d" % (tname, op, count))
            t = noncontig(value(rank, 7, dtype, op))
            dist.all_reduce(t, op=getattr(ReduceOp, op))
            same(t, expect_reduce(7, dtype, op), "all_reduce non-contiguous %s %s" % (tname, op))
            root = n - 1
            t = value(rank, 33333, dtype, op)
            run(lambda asy: dist.reduce(t, root, op=getattr(ReduceOp, op), async_op=asy), op == "MAX")
            if rank == root:
                same(t, expect_reduce(33333, dtype, op), "reduce %s %s" % (tname, op))
            else:
                same(t, value(rank, 33333, dtype, op), "reduce leaves non-root input %s" % tname)
    for tname, op in (("float32", "SUM"), ("int8", "MAX"), ("float16", "MIN"), ("int32", "PRODUCT"),
                      ("int64", "SUM"), ("bfloat16", "SUM"), ("float64", "AVG"), ("bool", "MAX")):
        t = value(rank, LARGE, dt(tname), op)
        dist.all_reduce(t, op=getattr(ReduceOp, op))
        same(t, expect_reduce(LARGE, dt(tname), op), "all_reduce large %s %s" % (tname, op))

    # bfloat16 of 64 KiB and more (zero-copy or staged inside a server, where one rank reads
    # every input of a block) is summed in float32 and rounded once: 256 + (n - 1) ones,
    # which a sum rounded to bfloat16 at each step would leave at 256 or 258 (its spacing
    # there is 2). Smaller ones round at each hop, as NCCL's (docs/design.md, "Precision").
    t = torch.full((1 << 19,), 256.0 if rank == 0 else 1.0, dtype=torch.bfloat16)
    dist.all_reduce(t)
    same(t, torch.full((1 << 19,), 256.0 + n - 1, dtype=torch.float64).to(torch.bfloat16),
         "all_reduce bfloat16 rounded once")

    # torch 2.x's uint16, uint32, uint64 (few torch ops take them: plain values, checked as
    # int64): sum wraps at the type's width, max and min compare unsigned.
    for tname, bits in (("uint16", 16), ("uint32", 32), ("uint64", 64)):
        ut = getattr(torch, tname, None)
        if ut is None:
            continue
        top = (1 << bits) - 1
        for op, want in (("SUM", (sum(top - r for r in range(n))) % (1 << bits)),
                         ("MAX", top), ("MIN", top - (n - 1))):
            t = torch.tensor([top - rank] * 9, dtype=torch.int64 if bits < 64 else torch.uint64)
            if bits < 64:
                t = t.to(ut)
            dist.all_reduce(t, op=getattr(ReduceOp, op))
            got = [int(x) for x in t.tolist()]
            checks[0] += 1
            assert got == [want] * 9, "rank %d: all_reduce %s %s: got %s want %s" % (
                rank, tname, op, got[:3], want)

    # all_reduce_coalesced: several tensors, one call.
    ts = [value(rank, c, torch.float32) for c in (3, 0, 1000, 7)]
    dist.all_reduce_coalesced(ts)
    for c, t in zip((3, 0, 1000, 7), ts):
        same(t, expect_reduce(c, torch.float32, "SUM"), "all_reduce_coalesced %d" % c)

    # reduce_scatter (list) and reduce_scatter_tensor.
    for tname in RED_TYPES:
        dtype = dt(tname)
        for op in ops_for(tname):
            for count in (0, 1, 7, 4097):
                full = value(rank, count * n, dtype, op)
                want = expect_reduce(count * n, dtype, op)[rank * count:(rank + 1) * count]
                out = torch.zeros(count, dtype=dtype)
                run(lambda asy: dist.reduce_scatter_tensor(out, full, op=getattr(ReduceOp, op),
                                                           async_op=asy), count == 7)
                same(out, want, "reduce_scatter_tensor %s %s %d" % (tname, op, count))
            ins = [value(rank, 5 * n, dtype, op)[j * 5:(j + 1) * 5].clone() for j in range(n)]
            out = noncontig(torch.zeros(5, dtype=dtype))
            dist.reduce_scatter(out, ins, op=getattr(ReduceOp, op))
            same(out, expect_reduce(5 * n, dtype, op)[rank * 5:(rank + 1) * 5],
                 "reduce_scatter list %s %s" % (tname, op))

    # Byte-moving operations on every dtype.
    for tname in MOVE_TYPES:
        dtype = dt(tname)
        for k, count in enumerate(SIZES + ([LARGE] if tname == "int8" else [])):
            a = k % 2 == 0
            for root in sorted({0, n - 1}):
                t = value(rank, count, dtype) if rank == root else torch.zeros(count, dtype=dtype)
                run(lambda asy: dist.broadcast(t, root, async_op=asy), a)
                same(t, value(root, count, dtype), "broadcast %s %d root %d" % (tname, count, root))
            outs = [torch.zeros(count, dtype=dtype) for _ in range(n)]
            run(lambda asy: dist.all_gather(outs, value(rank, count, dtype), async_op=asy), a)
            for r in range(n):
                same(outs[r], value(r, count, dtype), "all_gather %s %d from %d" % (tname, count, r))
            big = torch.zeros(count * n, dtype=dtype)
            run(lambda asy: dist.all_gather_into_tensor(big, value(rank, count, dtype),
                                                        async_op=asy), not a)
            for r in range(n):
                same(big[r * count:(r + 1) * count], value(r, count, dtype),
                     "all_gather_into_tensor %s %d" % (tname, count))
        # non-contiguous input and outputs
        outs = [noncontig(torch.zeros(7, dtype=dtype)) for _ in range(n)]
        dist.all_gather(outs, noncontig(value(rank, 7, dtype)))
        for r in range(n):
            same(outs[r], value(r, 7, dtype), "all_gather non-contiguous %s" % tname)
        t = noncontig(value(0, 7, dtype) if rank == 0 else torch.zeros(7, dtype=dtype))
        dist.broadcast(t, 0)
        same(t, value(0, 7, dtype), "broadcast non-contiguous %s" % tname)
        # gather and scatter, roots 0 and the middle
        for root in sorted({0, n // 2}):
            for count in (0, 1, 33333):
                gl = [torch.zeros(count, dtype=dtype) for _ in range(n)] if rank == root else None
                run(lambda asy: dist.gather(value(rank, count, dtype), gl, dst=root, async_op=asy),
                    count == 1)
                if rank == root:
                    for r in range(n):
                        same(gl[r], value(r, count, dtype), "gather %s %d root %d" % (tname, count, root))
                sl = [value(r, count, dtype) for r in range(n)] if rank == root else None
                out = torch.zeros(count, dtype=dtype)
                run(lambda asy: dist.scatter(out, sl, src=root, async_op=asy), count == 33333)
                same(out, value(rank, count, dtype), "scatter %s %d root %d" % (tname, count, root))
        # all_to_all_single: equal, then uneven splits (rank r sends j+r+1 rows... to j, 0 to self
        # on odd ranks), and all_to_all with lists.
        rows = 3
        inp = torch.stack([value(rank * n + j, rows * 2, dtype) for j in range(n)]).reshape(n * rows, 2)
        out = torch.zeros(n * rows, 2, dtype=dtype)
        dist.all_to_all_single(out, inp)
        for j in range(n):
            same(out[j * rows:(j + 1) * rows].reshape(-1), value(j * n + rank, rows * 2, dtype),
                 "all_to_all_single %s from %d" % (tname, j))

        def split(src, dst):
            return 0 if (src == dst and src % 2) else (src + 2 * dst) % 4 + (1 if src == 0 else 0)
        in_splits = [split(rank, j) for j in range(n)]
        out_splits = [split(j, rank) for j in range(n)]
        inp = torch.cat([value(rank * 100 + j, s * 3, dtype).reshape(s, 3) for j, s in enumerate(in_splits)])
        out = torch.zeros(sum(out_splits), 3, dtype=dtype)
        run(lambda asy: dist.all_to_all_single(out, inp, out_splits, in_splits, async_op=asy), True)
        off = 0
        for j, s in enumerate(out_splits):
            same(out[off:off + s].reshape(-1), value(j * 100 + rank, s * 3, dtype),
                 "all_to_all_single uneven %s from %d" % (tname, j))
            off += s
        ins = [value(rank * 100 + j, split(rank, j), dtype) for j in range(n)]
        outs = [torch.zeros(split(j, rank), dtype=dtype) for j in range(n)]
        dist.all_to_all(outs, ins)
        for j in range(n):
            same(outs[j], value(j * 100 + rank, split(j, rank), dtype), "all_to_all %s from %d" % (tname, j))

    # all_gather_coalesced: several sizes (torch requires one dtype).
    ins = [value(rank, 5, torch.float32), value(rank, 0, torch.float32), value(rank, 3, torch.float32)]
    outl = [[torch.zeros_like(t) for t in ins] for _ in range(n)]
    dist.all_gather_coalesced(outl, ins)
    for r in range(n):
        for t, o in zip([value(r, 5, torch.float32), value(r, 0, torch.float32), value(r, 3, torch.float32)], outl[r]):
            same(o, t, "all_gather_coalesced from %d" % r)

    # objects (pickled bytes over broadcast / all_gather)
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": rank, "s": "x" * rank})
    assert objs == [{"rank": r, "s": "x" * r} for r in range(n)], objs
    lst = [rank * 10, "hello"] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    assert lst == [0, "hello"], lst

    # point to point: ring shift blocking, then isend/irecv both ways at a size past the
    # library's buffers, then recv from any source.
    if n > 1:
        right, left = (rank + 1) % n, (rank - 1) % n
        for tname in MOVE_TYPES:
            dtype = dt(tname)
            for count in (0, 1, 33333):
                buf = torch.zeros(count, dtype=dtype)
                if rank % 2 == 0:
                    dist.send(value(rank, count, dtype), right)
                    dist.recv(buf, left)
                else:
                    dist.recv(buf, left)
                    dist.send(value(rank, count, dtype), right)
                same(buf, value(left, count, dtype), "send/recv %s %d" % (tname, count))
        big = 3 * (1 << 20) + 1
        r_buf = noncontig(torch.zeros(big, dtype=torch.float32))
        reqs = [dist.isend(value(rank, big, torch.float32), right), dist.irecv(r_buf, left)]
        for q in reqs:
            q.wait()
        same(r_buf, value(left, big, torch.float32), "isend/irecv %d floats" % big)
        ops_ = [dist.P2POp(dist.isend, value(rank, 7, torch.int32), right),
                dist.P2POp(dist.irecv, torch.zeros(7, dtype=torch.int32), left)]
        for q in dist.batch_isend_irecv(ops_):
            q.wait()
        same(ops_[1].tensor, value(left, 7, torch.int32), "batch_isend_irecv")
        if rank == 0:
            got = set()
            for _ in range(n - 1):
                b = torch.zeros(4, dtype=torch.int64)
                src = dist.recv(b)
                same(b, value(src, 4, torch.int64), "recv any source from %d" % src)
                got.add(src)
            assert got == set(range(1, n)), got
        else:
            dist.send(value(rank, 4, torch.int64), 0)

    # 4 KiB in the shapes users pass: complex (torch hands the backend a [count, 2] float view,
    # torch.view_as_real) and 2-D, exact; and no staging copy for them, which would show as
    # one allocation under the allocator's 64 KiB per call (memory_stats' "delegated"); a
    # slice (non-contiguous, staged) shows that the count sees a staging copy.
    import torch_hccl
    e = expect_reduce(1024, torch.float64, "SUM")
    shapes = []
    for cdt, real, k in ((torch.complex64, torch.float32, 512), (torch.complex128, torch.float64, 256)):
        re = value(rank, k, real)
        shapes.append(("%s [%d]" % (cdt, k), torch.complex(re, re.flip(0)),
                       torch.complex(e[:k], e[:k].flip(0)).to(cdt)))
    shapes.append(("float32 [32, 32]", value(rank, 1024, torch.float32).view(32, 32),
                   e.to(torch.float32).view(32, 32)))
    for name, t, want in shapes:
        run(lambda asy: dist.all_reduce(t, async_op=asy), checks[0] % 2)
        same(t, want, "all_reduce %s" % name)
    if torch_hccl.memory_stats()["enabled"]:
        calls, sl = 8, torch.zeros(2048)[::2]
        for name, t, _ in shapes + [("a slice", sl, None)]:
            d0 = torch_hccl.memory_stats()["delegated"]
            for _ in range(calls):
                dist.all_reduce(t)
            staged = torch_hccl.memory_stats()["delegated"] - d0
            if t is sl:
                assert staged >= calls, "rank %d: %d calls on a slice counted %d staging " \
                    "allocations; the fast-path check below cannot see a copy" % (rank, calls, staged)
            else:
                assert staged == 0, "rank %d: all_reduce %s allocated %d small buffers in %d " \
                    "calls: staged instead of passed as it is" % (rank, name, staged, calls)
        checks[0] += 1

    # A Work dropped before it finished: the call still completes into the tensor, in order.
    t = value(rank, 33333, torch.float32)
    dist.all_reduce(t, async_op=True)  # handle discarded at once
    dist.all_reduce(torch.zeros(1))
    same(t, expect_reduce(33333, torch.float32, "SUM"), "all_reduce with its Work dropped")

    run(lambda asy: dist.barrier(async_op=asy), True)
    dist.barrier()
    dist.destroy_process_group()
    print("rank %d: %d checks passed" % (rank, checks[0]))


CASES = {"ops": ops_case}


class TestOps(unittest.TestCase):
    def check_size(self, n):
        res = H.run_ranks(__file__, "ops", n, timeout=300)
        self.assertEqual(res.codes, [0] * n, res.text())
        for out in res.outputs:
            self.assertIn("checks passed", out)
        print("%d ranks: %.1f s; %s" % (n, res.elapsed, res.outputs[0].strip().splitlines()[-1]))

    def test_1_rank(self):
        self.check_size(1)

    def test_2_ranks(self):
        self.check_size(2)

    def test_4_ranks(self):
        self.check_size(4)

    def test_8_ranks(self):
        self.check_size(8)


if __name__ == "__main__":
    H.worker_main(CASES)
    unittest.main(verbosity=2)
