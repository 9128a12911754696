/*
 * device.hpp - the process's device, as torch_hccl sees it: one device per process, fixed by
 * the first process group (or by torch_hccl.set_device before it), and driven by every later
 * group (a new_group's rank is not the launcher's, so its communicator alone would name
 * another). The count of live groups is what makes set_device refuse a change.
 */
#pragma once

#include "hccl.h"

namespace torch_hccl {

/* torch_hccl.set_device: HcclSetDevice, refused (RuntimeError naming both devices) when a live
 * process group of this process already drives another device. */
void setDevice(int device);
/* HcclGetDevice: the device set, or the first group's once one exists, else -1. */
int currentDevice();

/* A process group opened over comm: the process's device becomes comm's unless one was set,
 * and the group counts as live. Pair with deviceGroupClosed() when the group goes. */
void deviceGroupOpened(HcclComm comm);
void deviceGroupClosed();

}  // namespace torch_hccl
