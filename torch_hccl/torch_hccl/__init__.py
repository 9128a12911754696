"""torch_hccl: libhccl as torch.distributed's "hccl" backend.

    import torch_hccl                      # registers the backend
    torch.distributed.init_process_group(backend="hccl")

(A pip-installed torch_hccl on torch 2.x needs no import: its "torch.backends" entry point,
_torch_hccl_autoload.py, registers the name at `import torch` and imports this module when the
first "hccl" group is made.)

Every process group made with backend "hccl" (the default group and each new_group) is one
libhccl communicator. The default group's is made over the c10d store torch passes in, so
env://, tcp:// and file:// init methods all work; a new_group's is split from the default
group's (HcclCommSplit) while that is open, else made over the store too (_split.py says when;
made_by(group) says which). The group's timeout bounds every operation. See docs/pytorch.md.

Importing also makes torch's CPU allocator a caching allocator over libhccl's shared memory
for tensors of TORCH_HCCL_ALLOCATOR_MIN_BYTES (64 KiB) and more, so that their allreduces can
run zero-copy; TORCH_HCCL_ALLOCATOR=0 leaves torch's allocator alone. memory_stats() and
empty_cache() report on it and trim it, as torch.cuda's functions of those names.
"""
import torch
import torch.distributed as dist


def _check_build():
    """Refuses, with a message, a _C built for another torch: loading it would abort inside
    torch's libraries (two torches in one process) instead of raising."""
    try:
        from . import _build
    except ImportError:
        return
    have = torch.__version__.split("+")[0]
    if have != _build.TORCH_VERSION:
        import sys
        raise ImportError(
            "torch_hccl in %s was built for torch %s (%s), but this is torch %s (%s): rebuild "
            "it for this Python (cmake -S . -B build -DHCCL_TORCH_PYTHON=%s, or pip install "
            "--no-build-isolation .)" % (__path__[0], _build.TORCH_VERSION, _build.PYTHON, have,
                                          sys.executable, sys.executable))


_check_build()
from . import _C  # noqa: E402

# Before anything is registered: TORCH_HCCL_ALLOCATOR and TORCH_HCCL_ALLOCATOR_MIN_BYTES are
# read here, and a malformed value fails the import with a ValueError naming it.
_C._allocator_install()

from . import _split  # noqa: E402

__all__ = ["ProcessGroupHCCL", "set_device", "current_device", "memory_stats", "empty_cache",
           "made_by"]
ProcessGroupHCCL = _C.ProcessGroupHCCL


def set_device(device):
    """The device this process drives (the role of torch.npu.set_device and
    torch.cuda.set_device): 3, "3" or "npu:3". Returns torch.device("cpu"), where this rank's
    tensors live (devices here are logical and their memory is the host's), so that a CUDA
    script's `torch.cuda.set_device(r); device = torch.device("cuda", r)` becomes
    `device = torch_hccl.set_device(r)` and its `.to(device)` calls stay.

    Call it before dist.init_process_group. Without it a rank drives DEVICE_ID (or the
    launcher's LOCAL_RANK) when its launcher set them for this very process, else its index
    among the ranks on its server."""
    if isinstance(device, str):
        text = device[4:] if device.startswith("npu:") else device
        if not text.isdigit():
            raise ValueError("torch_hccl.set_device(%r): expected a device index, 'N' or 'npu:N'"
                             % (device,))
        device = int(text)
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError("torch_hccl.set_device(%r): expected an int or 'npu:N'" % (device,))
    _C.set_device(device)
    return torch.device("cpu")


def current_device():
    """The device this process drives: set_device's, else its first process group's, else -1."""
    return _C.current_device()


def _create(opts, pg_options=None):
    """torch's creator for backend "hccl" (extended form: the group's name and ranks come
    along): split from the default group's communicator when _split arranged it with every
    rank, else over torch's store."""
    parent = _split.take(opts)
    if parent is not None:
        return _C.ProcessGroupHCCL(parent, opts.group_rank, opts.group_size,
                                   _split.color_of(opts.global_ranks_in_group), opts.timeout,
                                   str(opts.group_id))
    return _C.ProcessGroupHCCL(opts.store, opts.group_rank, opts.group_size, opts.timeout,
                               str(opts.group_id))


def made_by(group=None):
    """How this rank's communicator of an "hccl" process group (default: the default group)
    was made: "split" (from the default group's, HcclCommSplit) or "store" (over torch's c10d
    store). ValueError for a group that is not torch_hccl's on this rank."""
    pg = _split.backend_of(group if group is not None
                           else dist.distributed_c10d._get_default_group())
    if pg is None:
        raise ValueError("torch_hccl.made_by(%r): not an hccl process group of this rank" % (group,))
    return pg.made_by


def _register():
    """Registers "hccl" unless it is there: registered by the "torch.backends" entry point of a
    pip install (_torch_hccl_autoload.py, whose creator calls _create above: kept as it is), or
    by another package (Ascend's torch_npu: left to it, with one warning)."""
    plugin = dist.Backend._plugins.get("HCCL")
    if plugin is None:
        if _C.TORCH_BACKEND_API:
            # torch 2.x: a Backend for CPU tensors, which torch wraps in its ProcessGroup.
            dist.Backend.register_backend("hccl", _create, extended_api=True, devices=["cpu"])
        else:
            dist.Backend.register_backend("hccl", _create, extended_api=True)
    elif not (plugin.creator_fn is _create or getattr(plugin.creator_fn, "torch_hccl_autoload", 0)):
        import warnings
        warnings.warn('torch_hccl: backend "hccl" is already registered by %s; '
                      'init_process_group("hccl") uses that one, not torch_hccl'
                      % getattr(plugin.creator_fn, "__module__", "another package"), stacklevel=3)


_register()
_split.install()


def memory_stats():
    """The shared-memory allocator's counters for this process, as a dict (docs/pytorch.md):
    enabled, min_bytes, allocated_bytes, requested_bytes, peak_allocated_bytes,
    reserved_bytes (its arenas), cached_bytes (free inside them), largest_free_bytes, arenas,
    allocations (served), frees, delegated (requests below min_bytes, to torch's allocator),
    fallbacks (delegated because no arena could be made), released_bytes (by empty_cache),
    inherited_blocks and inherited_bytes (a forked child's blocks from its parent, not freed
    yet). A forked child starts its own counts."""
    stats = dict(_C._memory_stats())
    stats["enabled"] = bool(stats["enabled"])
    return stats


def empty_cache():
    """Gives the pages of the allocator's free blocks back to the system, as
    torch.cuda.empty_cache(); the arenas stay, so later tensors reuse them. Returns the bytes
    given back."""
    return _C._empty_cache()

