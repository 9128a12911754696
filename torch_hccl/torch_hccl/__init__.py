"""torch_hccl: libhccl as torch.distributed's "hccl" backend.

    import torch_hccl                      # registers the backend
    torch.distributed.init_process_group(backend="hccl")

Every process group made with backend "hccl" (the default group and each new_group) is one
libhccl communicator, made over the c10d store torch passes in, so env://, tcp:// and file://
init methods all work. The group's timeout bounds every operation. See docs/pytorch.md.
"""
import torch
import torch.distributed as dist

from . import _C

__all__ = ["ProcessGroupHCCL"]
ProcessGroupHCCL = _C.ProcessGroupHCCL


def _create(opts, pg_options=None):
    """torch's creator for backend "hccl" (extended form: the group's name comes along)."""
    return _C.ProcessGroupHCCL(opts.store, opts.group_rank, opts.group_size, opts.timeout,
                               str(opts.group_id))


if "HCCL" not in dist.Backend._plugins:
    dist.Backend.register_backend("hccl", _create, extended_api=True)
