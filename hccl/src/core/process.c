/*
 * process.c - the public calls that need no communicator but act for the whole process:
 * HcclSetDevice/HcclGetDevice (the process's device, which the settings read as the first source of
 * a rank's device: base/settings.c) and HcclMemAlloc/HcclMemFree/HcclMemDiscard (memory a server's
 * ranks can map: base/mem_region.c). The entry points live in core/ with the others; the work stays
 * on the floor, where algo/group.c also allocates its staging area.
 * (HcclGetErrorString/HcclGetLastErrorMessage stay in base/log.c: every layer records the last
 * error there, and the two only read it.)
 */
#include "hccl.h"
#include "log.h"
#include "mem_region.h"
#include "settings.h"

HcclResult HcclSetDevice(int32_t deviceId) {
  return hccl__process_device_set(deviceId, "HcclSetDevice");
}

HcclResult HcclGetDevice(int32_t *deviceId) {
  if (!deviceId) return hccl__fail(HCCL_E_PTR, "HcclGetDevice: deviceId is NULL");
  *deviceId = hccl__process_device();
  return HCCL_SUCCESS;
}

HcclResult HcclMemAlloc(void **ptr, size_t size) { return hccl__mem_alloc(ptr, size); }

HcclResult HcclMemFree(void *ptr) { return hccl__mem_free(ptr); }

HcclResult HcclMemDiscard(void *ptr, size_t size) { return hccl__mem_discard(ptr, size); }
