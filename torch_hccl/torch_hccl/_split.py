"""_split.py - how an "hccl" new_group makes its communicator: split from the default group's
(HcclCommSplit, no store traffic) whenever the default group is torch_hccl's and open, else over
torch's store (HcclCommInitStore) as before.

Why a wrapper of a private function: torch offers a third-party backend no hook for this
(read in torch 2.13's and 1.13's distributed_c10d.py). The creator is called on the members
only, with no split source: torch hands one to NCCL alone, and only when the default group has
an accelerator bound (bound_device_id, which must be a non-CPU device); the backend's
split / supports_splitting and perform_nocolor_split are reached only through that bound
device, and split_group refuses to run without an accelerator. HcclCommSplit is collective over
the parent, so ranks outside the new group must call it too, at the same point. The one place
every rank passes through, in the same order, is distributed_c10d._new_process_group_helper
(new_group, new_subgroups and DeviceMesh all reach it; a non-member returns from it with
NON_GROUP_MEMBER, before torch's store barrier). install() wraps that function, once, and only
when it has the parameters read here (torch 2.13's and 1.13's both do); otherwise nothing is
wrapped and every group is made over the store. The C part of the split is
ProcessGroupHCCL's second constructor, split_out and agree (csrc/process_group.hpp).

Per call, on every rank, from arguments torch requires to be the same on every rank:
  eligible: a subgroup (ranks given), backend "hccl", the default group's backend torch_hccl's
            and open, no pg_tag (a tagged call may return an existing group on members only),
            and not use_local_synchronization (torch 2.x; non-members do not come then; seen
            as a group name other than the next of torch's group counter: a hashed name);
  then:     every rank votes on the default group (one allreduce MIN) with TORCH_HCCL_SPLIT;
            all 1: members split (colour color_of(ranks), key = group rank) in the creator,
            non-members call split_out after torch returns them NON_GROUP_MEMBER; any 0: the
            store, on all.
"""
import functools
import inspect
import threading
import zlib

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from . import _C

_NEEDED = ("group_size", "group_rank", "global_ranks_in_group", "backend", "store", "group_name",
           "timeout")
# torch 2.x's new_group has use_local_synchronization (a hashed group name); 1.13's does not.
_LOCAL_SYNC = "use_local_synchronization" in inspect.signature(dist.new_group).parameters
# A member's split in progress on this thread, for the creator: (ranks, parent).
_pending = threading.local()
# What install() did: "split" (wrapped) or "store: <why not>".
status = "store: not installed"


def backend_of(group):
    """The ProcessGroupHCCL of a process group (torch 2.x keeps it inside its ProcessGroup for
    "cpu"; on 1.13 the group is it), or None."""
    if isinstance(group, _C.ProcessGroupHCCL):
        return group
    try:
        pg = group._get_backend(torch.device("cpu"))
    except (AttributeError, RuntimeError):
        return None
    return pg if isinstance(pg, _C.ProcessGroupHCCL) else None


def _parent(args):
    """The default group's ProcessGroupHCCL when this call may split from it, else None."""
    if not args["global_ranks_in_group"] or str(args["backend"]).lower() != "hccl":
        return None
    if args.get("pg_tag") not in (None, "") or not dist.is_initialized():
        return None
    if _LOCAL_SYNC:
        count = getattr(getattr(c10d, "_world", None), "group_count", None)
        if not isinstance(count, int) or str(args["group_name"]) != str(count - 1):
            return None
    parent = backend_of(c10d._get_default_group())
    return parent if parent is not None and parent.alive else None


def color_of(ranks):
    """The split colour of a group: its global ranks' CRC-32 in 31 bits, so the ranks that
    make different groups at the same new_group call (new_subgroups over a subgroup: [0] on
    rank 0, [2] on rank 2) split into different communicators; a collision of two lists made
    at one call would join them, and the constructor's check of rank and size names it."""
    return zlib.crc32(",".join(str(r) for r in ranks).encode()) & 0x7FFFFFFF


def take(opts):
    """For the creator: the parent to split from when this creation is the member's half of a
    split that every rank agreed to, else None (make the group over the store)."""
    want = getattr(_pending, "ranks", None)
    if want is None or want != list(opts.global_ranks_in_group):
        return None
    parent = _pending.parent
    _pending.ranks = _pending.parent = None
    return parent


def _wrap(helper, sig, enabled):
    @functools.wraps(helper)
    def wrapped(*args, **kwargs):
        bound = sig.bind(*args, **kwargs).arguments
        parent = _parent(bound)
        try:
            agreed = parent is not None and parent.agree(enabled)
        except RuntimeError:  # the default group broke since: its other ranks fail the vote too
            agreed = False
        if not agreed:
            return helper(*args, **kwargs)
        ranks = list(bound["global_ranks_in_group"])
        if dist.get_rank() not in ranks:
            out = helper(*args, **kwargs)  # NON_GROUP_MEMBER, after torch's own checks
            parent.split_out()
            return out
        _pending.ranks, _pending.parent = ranks, parent
        try:
            return helper(*args, **kwargs)
        finally:
            _pending.ranks = _pending.parent = None
    wrapped.torch_hccl_split = True
    return wrapped


def install():
    """Wraps distributed_c10d._new_process_group_helper (once) when its signature is the one
    expected; reads TORCH_HCCL_SPLIT (ValueError naming a bad value). Sets `status`."""
    global status
    enabled = _C._split_setting()
    helper = getattr(c10d, "_new_process_group_helper", None)
    if helper is None:
        status = "store: torch has no distributed_c10d._new_process_group_helper"
        return
    if getattr(helper, "torch_hccl_split", False):
        return
    try:
        sig = inspect.signature(helper)
    except (TypeError, ValueError):
        status = "store: _new_process_group_helper has no signature to check"
        return
    missing = [p for p in _NEEDED if p not in sig.parameters]
    if missing:
        status = "store: _new_process_group_helper has no parameter %s" % ", ".join(missing)
        return
    c10d._new_process_group_helper = _wrap(helper, sig, enabled)
    status = "split" if enabled else "store: TORCH_HCCL_SPLIT=0"
