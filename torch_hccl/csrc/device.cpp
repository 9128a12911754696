/*
 * device.cpp - the process's device and its live groups, under one mutex (contract:
 * device.hpp).
 */
#include "device.hpp"

#include <mutex>

#include <c10/util/Exception.h>

#include "errors.hpp"

namespace torch_hccl {
namespace {

/* Process groups alive in this process, and the device they drive (one per process). */
std::mutex g_device_mu;
int g_live_groups = 0;
int g_group_device = -1;

}  // namespace

void setDevice(int device) {
  std::lock_guard<std::mutex> lock(g_device_mu);
  TORCH_CHECK(g_live_groups == 0 || device == g_group_device, "torch_hccl.set_device(", device,
              "): this process's process groups already drive device ", g_group_device,
              "; a process drives one device: call set_device before "
              "dist.init_process_group");
  checkHccl(HcclSetDevice(device), "set_device");
}

int currentDevice() {
  int32_t d = -1;
  checkHccl(HcclGetDevice(&d), "current_device");
  return d;
}

void deviceGroupOpened(HcclComm comm) {
  int32_t dev = -1, set = -1;
  HcclGetDeviceId(comm, &dev);
  HcclGetDevice(&set);
  std::lock_guard<std::mutex> lock(g_device_mu);
  if (set < 0) HcclSetDevice(dev);
  g_group_device = dev;
  g_live_groups++;
}

void deviceGroupClosed() {
  std::lock_guard<std::mutex> lock(g_device_mu);
  g_live_groups--;
}

}  // namespace torch_hccl
