/*
 * hello_hccl.c - a user's first program against an installed libhccl: joins the job from the
 * launcher's variables, allreduces each rank's number, checks the sum. Built by
 * test_install.sh with pkg-config and with find_package(hccl).
 */
#include <hccl.h>
#include <stdio.h>

int main(void) {
  HcclComm comm;
  if (HcclCommInitFromEnv(&comm) != HCCL_SUCCESS) {
    fprintf(stderr, "init: %s\n", HcclGetLastErrorMessage());
    return 1;
  }
  uint32_t rank, n;
  HcclGetRankId(comm, &rank);
  HcclGetRankSize(comm, &n);
  float x[3] = {(float)rank + 1, 1, 2};
  if (HcclAllReduce(x, x, 3, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, NULL) != HCCL_SUCCESS) {
    fprintf(stderr, "allreduce: %s\n", HcclGetLastErrorMessage());
    return 1;
  }
  int ok = x[0] == (float)(n * (n + 1) / 2) && x[1] == (float)n && x[2] == 2.0f * (float)n;
  printf("rank %u of %u: sum %g %s\n", rank, n, x[0], ok ? "ok" : "WRONG");
  HcclCommDestroy(comm);
  return ok ? 0 : 1;
}
