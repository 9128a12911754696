#!/usr/bin/python3
"""torch_perf_data.py - the checking data of bench/torch_allreduce_perf.py: allreduce_perf's
(perf/perf_data.c) built with torch, for every dtype torch_hccl reduces. One job, as perf_data.c
is one for the C programs: for a (type, op) on rank r of p, this rank's input and the exact
result (small integers whose reductions are exact in every order and type; bool: one rank's
true, or false, per element; complex: the real data in the real part, the data one element on
in the imaginary part), and a bit-for-bit count of wrong elements. torch is passed in, not
imported, so the flags of torch_allreduce_perf.py are read before torch loads.

Imported, not run: run as a program it prints this text for -h or --help and refuses anything
else (exit 2).
"""
import sys

# Integers up to this magnitude are exact in the type (perf_data.c's L); complex: its parts'.
EXACT = {"int8": 2**7 - 1, "uint8": 2**8 - 1, "int16": 2**15 - 1, "uint16": 2**16 - 1,
         "int32": 2**31 - 1, "uint32": 2**32 - 1, "int64": 2**63 - 1, "uint64": 2**64 - 1,
         "half": 2**11, "bfloat16": 2**8, "float": 2**24, "double": 2**53,
         "complex64": 2**24, "complex128": 2**53}
ESIZE = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
         "uint64": 8, "half": 2, "bfloat16": 2, "float": 4, "double": 8, "bool": 1,
         "complex64": 8, "complex128": 16}


class Data:
    """allreduce_perf's checking data (the top of perf/perf_data.c) for one (type, op) on rank
    `rank` of p, built with torch: `mine` is this rank's input and `want` the result, one
    period (105 p elements) each, as tensors of the storage dtype (the unsigned shell types are
    kept as the signed type of their size, viewed as theirs only for the call), so that torch
    needs no arithmetic on them."""

    def __init__(self, torch, tname, op, rank, p):
        self.torch, self.tname, self.op, self.p = torch, tname, op, p
        self.dtype = getattr(torch, {"half": "float16", "float": "float32",
                                     "double": "float64"}.get(tname, tname))
        self.unsigned = tname.startswith("uint")
        self.storage = {"uint16": torch.int16, "uint32": torch.int32,
                        "uint64": torch.int64}.get(tname, self.dtype)
        e = torch.arange(105 * p, dtype=torch.int64)
        vals = [self.stored(r, e) for r in range(p)]
        self.mine, self.want = vals[rank], self.reduce(vals)

    def value(self, r, e):
        """v(op, r, e) of perf_data.c as int64 (unsigned types not yet wrapped)."""
        torch, p, op = self.torch, self.p, self.op
        s = (7 * r + e) % 5 - 2
        if op == "sum":
            return s + (2 if self.unsigned else 0)
        if op == "prod":
            k = (r + e) % 3
            v = torch.full_like(e, 3 if self.unsigned else -1)
            v[k == 0] = 1
            v[k == 1] = 2 if r < 8 else 1
            return v
        if op == "avg":
            per_rank = EXACT[self.tname] // p // (2 if self.unsigned else 1)
            big = 3 if per_rank >= 6 else 0 if per_rank <= 3 else per_rank - 3  # A
            a = e % (2 * big + 1) - big
            u = torch.where(e % p == r, e % 3 - 1, torch.zeros_like(e))
            return a + s + u + (big + 3 if self.unsigned else 0)
        return (r + e) % p + e % 7 - 3  # max, min

    def stored(self, r, e):
        """Rank r's values in the storage dtype (integers wrap, as C's casts do)."""
        torch = self.torch
        if self.dtype == torch.bool:  # max: one rank's true (or none); min: the negation
            v = (e % self.p == r) & (e % 3 != 0)
            return v if self.op == "max" else ~v
        if self.dtype.is_complex:
            re, im = self.value(r, e), self.value(r, e + 1)
            return torch.complex(re.double(), im.double()).to(self.dtype)
        v = self.value(r, e)
        if self.dtype.is_floating_point:
            return v.double().to(self.dtype)
        return self.store(v)

    def store(self, v):
        """int64 values wrapped to the type, in the storage dtype (explicitly: a cast of an
        out-of-range value is not something to lean on)."""
        bits = 8 * ESIZE[self.tname]
        if bits < 64:
            v = v & (2**bits - 1)
            if self.storage != self.torch.uint8:  # to the signed storage type's range
                v = v - (v >= 2**(bits - 1)).to(v.dtype) * 2**bits
        return v.to(self.storage)

    def wide(self, t):
        """Stored integers as int64: sign-extended, or zero-extended for unsigned types (uint64:
        its bits)."""
        bits = 8 * ESIZE[self.tname]
        w = t.to(self.torch.int64)
        return w & (2**bits - 1) if self.unsigned and bits < 64 else w

    def reduce(self, vals):
        torch, op, p = self.torch, self.op, self.p
        if self.dtype == torch.bool:
            acc = vals[0].clone()
            for v in vals[1:]:
                acc = acc | v if op == "max" else acc & v
            return acc
        if self.dtype.is_floating_point or self.dtype.is_complex:
            acc = [v.to(torch.complex128 if self.dtype.is_complex else torch.float64)
                   for v in vals]
        else:
            acc = [self.wide(v) for v in vals]
        # uint64 compares as unsigned: with the top bit flipped, int64's order is uint64's
        flip = -2**63 if self.tname == "uint64" and op in ("max", "min") else 0
        xs = [x ^ flip for x in acc] if flip else acc
        acc = xs[0]
        for x in xs[1:]:  # int64 sums and products wrap as the type's do
            acc = (acc + x if op in ("sum", "avg") else acc * x if op == "prod"
                   else torch.maximum(acc, x) if op == "max" else torch.minimum(acc, x))
        if flip:
            acc = acc ^ flip
        if op == "avg":  # the sum in the type, then / p: toward zero, or rounded once
            if self.dtype.is_complex:  # each part on its own (torch's complex / p is not
                return torch.complex(acc.real / p, acc.imag / p).to(self.dtype)  # rounded so)
            if self.dtype.is_floating_point:
                return (acc / p).to(self.dtype)
            acc = torch.div(self.wide(self.store(acc)), p, rounding_mode="trunc")
        if self.dtype.is_floating_point or self.dtype.is_complex:
            return acc.to(self.dtype)
        return self.store(acc)


def count_wrong(torch, got, want):
    """The elements of got whose bits differ from want's (a complex element counts once)."""
    def bits(t):
        if t.is_complex():
            t = torch.view_as_real(t)
        if t.dtype == torch.bool:
            return t
        return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32,
                       8: torch.int64}[t.element_size()])
    differ = bits(got) != bits(want)
    return int((differ.any(dim=-1) if got.is_complex() else differ).sum())


if __name__ == "__main__":
    if sys.argv[1:] in (["-h"], ["--help"]):
        sys.stdout.write("usage: imported by bench/torch_allreduce_perf.py, not run\n\n" + __doc__)
        sys.exit(0)
    sys.stderr.write("torch_perf_data.py: %s: this module is imported by "
                     "torch_allreduce_perf.py; it takes no flags (--help says more)\n"
                     % (" ".join(sys.argv[1:]) or "no flags"))
    sys.exit(2)
