"""torch_split.py - the time to make the groups of a 3D layout (tensor x pipeline x data) through
torch: dist.new_group for every group of every dimension, on every rank in the same order, as
Megatron-style code does. Run under npu-launch (bench/split.sh --torch runs it for hccl's split,
hccl over the store with TORCH_HCCL_SPLIT=0, and gloo). Prints one line from rank 0:

  torch_split: backend=hccl made_by=split ranks=8 layout=2x2x2 groups=12 total_ms=... per_group_ms=...

total_ms is the slowest rank's time from a barrier to its last new_group returning; then each
group's allreduce is checked (the sum of its members), so a broken group fails the run.

usage: python3 bench/torch_split.py BACKEND [TP=2] [PP=2]
"""
import argparse
import time


def main():
    ap = argparse.ArgumentParser(
        prog="torch_split.py", description="the time to make a 3D layout's groups through "
        "dist.new_group; run one process per rank under npu-launch (bench/split.sh --torch)")
    ap.add_argument("backend", nargs="?", choices=["hccl", "gloo"])
    ap.add_argument("tp", nargs="?", type=int, default=2, help="tensor-parallel size (2)")
    ap.add_argument("pp", nargs="?", type=int, default=2, help="pipeline-parallel size (2)")
    args, extra = ap.parse_known_args()
    if extra:
        ap.error("unrecognized arguments: %s" % " ".join(extra))
    if args.backend is None:
        ap.error("the backend (hccl or gloo) is required")
    backend, tp, pp = args.backend, args.tp, args.pp
    import torch  # after the flags: -h and a wrong flag are answered without loading torch
    import torch.distributed as dist
    if backend == "hccl":
        import torch_hccl  # noqa: F401
    dist.init_process_group(backend)
    rank, n = dist.get_rank(), dist.get_world_size()
    if n % (tp * pp):
        raise SystemExit("torch_split: %d ranks is not a multiple of TP x PP = %d" % (n, tp * pp))
    dp = n // (tp * pp)
    coord = lambda r: (r % tp, r // tp % pp, r // (tp * pp))  # noqa: E731
    layouts = []
    for axis in range(3):
        rest = lambda r: tuple(c for i, c in enumerate(coord(r)) if i != axis)  # noqa: E731
        for key in sorted({rest(r) for r in range(n)}):
            layouts.append([r for r in range(n) if rest(r) == key])
    dist.barrier()
    start = time.perf_counter()
    groups = [(ranks, dist.new_group(ranks)) for ranks in layouts]
    took = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(took, op=dist.ReduceOp.MAX)
    made = "-"
    for ranks, g in groups:
        if rank not in ranks:
            continue
        t = torch.tensor([float(rank)])
        dist.all_reduce(t, group=g)
        if t.item() != float(sum(ranks)):
            raise SystemExit("torch_split: group %s gave %s" % (ranks, t.item()))
        if backend == "hccl":
            made = torch_hccl.made_by(g)
    if rank == 0:
        ms = took.item() * 1e3
        print("torch_split: backend=%s made_by=%s ranks=%d layout=%dx%dx%d groups=%d total_ms=%.1f "
              "per_group_ms=%.2f" % (backend, made, n, tp, pp, dp, len(layouts), ms,
                                     ms / len(layouts)), flush=True)
    for _, g in groups:
        if g != dist.GroupMember.NON_GROUP_MEMBER:
            dist.destroy_process_group(g)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
