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

__all__ = ["ProcessGroupHCCL", "set_device", "current_device"]
ProcessGroupHCCL = _C.ProcessGroupHCCL


def set_device(device):
    """The device this process drives (the role of torch.npu.set_device): 3, "3" or "npu:3".

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


def current_device():
    """The device this process drives: set_device's, else its first process group's, else -1."""
    return _C.current_device()


def _create(opts, pg_options=None):
    """torch's creator for backend "hccl" (extended form: the group's name comes along)."""
    return _C.ProcessGroupHCCL(opts.store, opts.group_rank, opts.group_size, opts.timeout,
                               str(opts.group_id))


if "HCCL" not in dist.Backend._plugins:
    dist.Backend.register_backend("hccl", _create, extended_api=True)
