/*
 * coll.c - the collective entry points: each checks its arguments (a failure names the value
 * and the rule), describes the call (struct hccl_op, coll.h) and hands it to coll_run.c, which
 * runs it now or queues it. Also the entry points by which a framework names the element type
 * its user passed (HcclSetUserTypes, HcclSetCallUserType), for messages in the user's words.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "coll_run.h"
#include "comm.h"
#include "dtype.h"
#include "group_open.h"
#include "log.h"
#include "reduce.h"

/* ---- the user's element type ----
 * HcclSetCallUserType names it for this thread's next collective call; that call's first check
 * (check_call, which every collective entry point makes first) takes it, so a refused call
 * takes it too and it never names a later call; submit() hands it to the call. */

static _Thread_local uint32_t next_user_type; /* code + 1; 0: none */
static _Thread_local uint32_t call_user_type; /* the current call's, taken by check_comm */

HcclResult HcclSetUserTypes(const HcclUserType *types, uint32_t count) {
  return hccl__user_types_set(types, count);
}

HcclResult HcclSetCallUserType(uint32_t code) {
  size_t size;
  if (!hccl__user_type(code, &size))
    return hccl__fail(HCCL_E_PARA,
                      "HcclSetCallUserType: type %u was not named by HcclSetUserTypes", code);
  next_user_type = code + 1;
  return HCCL_SUCCESS;
}

static HcclResult submit(struct hccl_comm *c, struct hccl_op *o, HcclRequest *req) {
  o->user_type = call_user_type;
  return hccl__coll_submit(c, o, req);
}

/* ---- argument checks ---- */

static HcclResult check_comm(struct hccl_comm *c, const char *fn) {
  if (!c) return hccl__fail(HCCL_E_PTR, "%s: comm is NULL", fn);
  hccl__log_bind(&c->log);
  return hccl__group_refuse_call(fn);
}

/* A collective call's first check: it takes the user's type named for it (if any), then checks
 * comm. */
static HcclResult check_call(struct hccl_comm *c, const char *fn) {
  call_user_type = next_user_type;
  next_user_type = 0;
  return check_comm(c, fn);
}

static HcclResult check_dtype(struct hccl_comm *c, const char *fn, HcclDataType dt) {
  if (hccl__dtype_size(dt) == 0)
    return hccl__fail(HCCL_E_PARA, "%s on rank %u: data type %d is not an HcclDataType", fn,
                      c->rank, (int)dt);
  return HCCL_SUCCESS;
}

/* The op of a reducing call: a built-in op the type takes, or a PREMUL_SUM op of this
 * communicator made for this type, which o gets as HCCL__RED_PREMUL_SUM and its scalar. */
static HcclResult check_reduce(struct hccl_comm *c, const char *fn, HcclDataType dt,
                               HcclReduceOp op, struct hccl_op *o) {
  HCCL_TRY(check_dtype(c, fn, dt));
  o->op = op;
  if ((unsigned)op >= HCCL__PREMUL_OP_BASE && (unsigned)op - HCCL__PREMUL_OP_BASE < c->npremul &&
      c->premul[(unsigned)op - HCCL__PREMUL_OP_BASE].used) {
    const struct hccl_premul *m = &c->premul[(unsigned)op - HCCL__PREMUL_OP_BASE];
    if (m->dt != dt)
      return hccl__fail(HCCL_E_PARA,
                        "%s on rank %u: reduce op %d is a premul sum made for data type %s; this "
                        "call's data type is %s",
                        fn, c->rank, (int)op, hccl__dtype_name(m->dt), hccl__dtype_name(dt));
    o->op = HCCL__RED_PREMUL_SUM;
    o->scalar = m->value;
    if (m->residence == HCCL_SCALAR_PER_CALL) memcpy(&o->scalar, m->at, hccl__dtype_size(dt));
    return HCCL_SUCCESS;
  }
  if (!hccl__op_valid(op))
    return hccl__fail(HCCL_E_PARA,
                      "%s on rank %u: reduce op %d is not valid; use sum, prod, max, min, avg, "
                      "band, bor, bxor, or an op HcclRedOpCreatePreMulSum made on this "
                      "communicator",
                      fn, c->rank, (int)op);
  if (!hccl__reduce_supported(dt, op))
    return hccl__fail(HCCL_E_NOT_SUPPORT,
                      "%s on rank %u: reduce op %s takes integer types; data type %s is not one",
                      fn, c->rank, hccl__op_name(op), hccl__dtype_name(dt));
  return HCCL_SUCCESS;
}

HcclResult HcclRedOpCreatePreMulSum(HcclReduceOp *op, void *scalar, HcclDataType dataType,
                                    HcclScalarResidence residence, HcclComm comm) {
  HCCL_TRY(check_comm(comm, "HcclRedOpCreatePreMulSum"));
  HCCL_TRY(check_dtype(comm, "HcclRedOpCreatePreMulSum", dataType));
  if (!op || !scalar)
    return hccl__fail(HCCL_E_PTR, "HcclRedOpCreatePreMulSum on rank %u: %s is NULL", comm->rank,
                      op ? "scalar" : "op");
  if (residence != HCCL_SCALAR_HOST_IMMEDIATE && residence != HCCL_SCALAR_PER_CALL)
    return hccl__fail(HCCL_E_PARA,
                      "HcclRedOpCreatePreMulSum on rank %u: residence %d is not "
                      "HCCL_SCALAR_HOST_IMMEDIATE (0) or HCCL_SCALAR_PER_CALL (1)",
                      comm->rank, (int)residence);
  uint32_t i = 0;
  while (i < comm->npremul && comm->premul[i].used)
    i++;
  if (i == comm->npremul) {
    uint32_t n = comm->npremul ? 2 * comm->npremul : 8;
    if (n > INT32_MAX - HCCL__PREMUL_OP_BASE)
      return hccl__fail(HCCL_E_MEMORY, "HcclRedOpCreatePreMulSum on rank %u: %u ops are live",
                        comm->rank, comm->npremul);
    struct hccl_premul *t = realloc(comm->premul, n * sizeof(*t));
    if (!t) return hccl__fail(HCCL_E_MEMORY, "out of memory for a premul sum op");
    memset(t + comm->npremul, 0, (n - comm->npremul) * sizeof(*t));
    comm->premul = t;
    comm->npremul = n;
  }
  struct hccl_premul *m = &comm->premul[i];
  *m = (struct hccl_premul){.used = true, .dt = dataType, .residence = residence, .at = scalar};
  memcpy(&m->value, scalar, hccl__dtype_size(dataType));
  *op = (HcclReduceOp)(HCCL__PREMUL_OP_BASE + i);
  return HCCL_SUCCESS;
}

HcclResult HcclRedOpDestroy(HcclReduceOp op, HcclComm comm) {
  HCCL_TRY(check_comm(comm, "HcclRedOpDestroy"));
  unsigned i = (unsigned)op - HCCL__PREMUL_OP_BASE;
  if ((unsigned)op < HCCL__PREMUL_OP_BASE || i >= comm->npremul || !comm->premul[i].used)
    return hccl__fail(HCCL_E_PARA,
                      "HcclRedOpDestroy on rank %u: reduce op %d was not made by "
                      "HcclRedOpCreatePreMulSum on this communicator (or was destroyed)",
                      comm->rank, (int)op);
  comm->premul[i].used = false;
  return HCCL_SUCCESS;
}

/* count elements of dt (factor blocks of them) fit in size_t bytes, and a call that moves any
 * has both buffers; *bytes: the call's size, count x the element's (struct hccl_op's bytes). */
static HcclResult check_bufs(struct hccl_comm *c, const char *fn, uint64_t count, HcclDataType dt,
                             uint64_t factor, const void *send, const void *recv,
                             const char *send_name, const char *recv_name, size_t *bytes) {
  size_t esz = hccl__dtype_size(dt);
  if (count > SIZE_MAX / esz / factor)
    return hccl__fail(HCCL_E_PARA, "%s on rank %u: count %llu is too large for this machine", fn,
                      c->rank, (unsigned long long)count);
  if (count > 0 && (!send || !recv))
    return hccl__fail(HCCL_E_PTR, "%s on rank %u: %s is NULL with count %llu", fn, c->rank,
                      send ? recv_name : send_name, (unsigned long long)count);
  *bytes = count * esz;
  return HCCL_SUCCESS;
}

static HcclResult check_root(struct hccl_comm *c, const char *fn, uint32_t root) {
  if (root >= c->nranks)
    return hccl__fail(HCCL_E_PARA,
                      "%s on rank %u: root %u is not a rank of this %u-rank "
                      "communicator",
                      fn, c->rank, root, c->nranks);
  return HCCL_SUCCESS;
}

HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                         HcclReduceOp op, HcclComm comm, HcclRequest *request) {
  HCCL_TRY(check_call(comm, "HcclAllReduce"));
  struct hccl_op o = {.kind = HCCL_K_ALLREDUCE,
                      .send = sendBuf,
                      .recv = recvBuf,
                      .count = count,
                      .dt = dataType};
  HCCL_TRY(check_reduce(comm, "HcclAllReduce", dataType, op, &o));
  HCCL_TRY(check_bufs(comm, "HcclAllReduce", count, dataType, 1, sendBuf, recvBuf, "sendBuf",
                      "recvBuf", &o.bytes));
  return submit(comm, &o, request);
}

HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
                         HcclComm comm, HcclRequest *request) {
  HCCL_TRY(check_call(comm, "HcclBroadcast"));
  HCCL_TRY(check_dtype(comm, "HcclBroadcast", dataType));
  HCCL_TRY(check_root(comm, "HcclBroadcast", root));
  size_t bytes = 0;
  HCCL_TRY(check_bufs(comm, "HcclBroadcast", count, dataType, 1, buf, buf, "buf", "buf", &bytes));
  struct hccl_op o = {.kind = HCCL_K_BROADCAST,
                      .send = buf,
                      .recv = buf,
                      .count = count,
                      .dt = dataType,
                      .root = root,
                      .bytes = bytes};
  return submit(comm, &o, request);
}

HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                         HcclComm comm, HcclRequest *request) {
  HCCL_TRY(check_call(comm, "HcclAllGather"));
  HCCL_TRY(check_dtype(comm, "HcclAllGather", dataType));
  size_t bytes = 0;
  HCCL_TRY(check_bufs(comm, "HcclAllGather", sendCount, dataType, comm->nranks, sendBuf, recvBuf,
                      "sendBuf", "recvBuf", &bytes));
  struct hccl_op o = {.kind = HCCL_K_ALLGATHER,
                      .send = sendBuf,
                      .recv = recvBuf,
                      .count = sendCount,
                      .dt = dataType,
                      .bytes = bytes};
  return submit(comm, &o, request);
}

HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                             HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                             HcclRequest *request) {
  HCCL_TRY(check_call(comm, "HcclReduceScatter"));
  struct hccl_op o = {.kind = HCCL_K_REDUCE_SCATTER,
                      .send = sendBuf,
                      .recv = recvBuf,
                      .count = recvCount,
                      .dt = dataType};
  HCCL_TRY(check_reduce(comm, "HcclReduceScatter", dataType, op, &o));
  HCCL_TRY(check_bufs(comm, "HcclReduceScatter", recvCount, dataType, comm->nranks, sendBuf,
                      recvBuf, "sendBuf", "recvBuf", &o.bytes));
  if (comm->nranks == 1) o.count = recvCount; /* one block: a copy */
  return submit(comm, &o, request);
}

HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                      HcclReduceOp op, uint32_t root, HcclComm comm, HcclRequest *request) {
  HCCL_TRY(check_call(comm, "HcclReduce"));
  struct hccl_op o = {.kind = HCCL_K_REDUCE,
                      .send = sendBuf,
                      .recv = recvBuf,
                      .count = count,
                      .dt = dataType,
                      .root = root};
  HCCL_TRY(check_reduce(comm, "HcclReduce", dataType, op, &o));
  HCCL_TRY(check_root(comm, "HcclReduce", root));
  /* recvBuf matters on the root only. */
  HCCL_TRY(check_bufs(comm, "HcclReduce", count, dataType, 1, sendBuf,
                      comm->rank == root ? recvBuf : sendBuf, "sendBuf", "recvBuf", &o.bytes));
  return submit(comm, &o, request);
}

HcclResult HcclBarrier(HcclComm comm, HcclRequest *request) {
  HCCL_TRY(check_call(comm, "HcclBarrier"));
  struct hccl_op o = {.kind = HCCL_K_BARRIER, .dt = HCCL_DATA_TYPE_INT8};
  return submit(comm, &o, request);
}

HcclResult HcclGather(void *sendBuf, void *recvBuf, uint64_t sendCount, HcclDataType dataType,
                      uint32_t root, HcclComm comm, HcclRequest *request) {
  HCCL_TRY(check_call(comm, "HcclGather"));
  HCCL_TRY(check_dtype(comm, "HcclGather", dataType));
  HCCL_TRY(check_root(comm, "HcclGather", root));
  /* recvBuf matters on the root only. */
  size_t bytes = 0;
  HCCL_TRY(check_bufs(comm, "HcclGather", sendCount, dataType, comm->nranks, sendBuf,
                      comm->rank == root ? recvBuf : sendBuf, "sendBuf", "recvBuf", &bytes));
  struct hccl_op o = {.kind = HCCL_K_GATHER,
                      .send = sendBuf,
                      .recv = recvBuf,
                      .count = sendCount,
                      .dt = dataType,
                      .root = root,
                      .bytes = bytes};
  return submit(comm, &o, request);
}

HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount, HcclDataType dataType,
                       uint32_t root, HcclComm comm, HcclRequest *request) {
  HCCL_TRY(check_call(comm, "HcclScatter"));
  HCCL_TRY(check_dtype(comm, "HcclScatter", dataType));
  HCCL_TRY(check_root(comm, "HcclScatter", root));
  /* sendBuf matters on the root only. */
  size_t bytes = 0;
  HCCL_TRY(check_bufs(comm, "HcclScatter", recvCount, dataType, comm->nranks,
                      comm->rank == root ? sendBuf : recvBuf, recvBuf, "sendBuf", "recvBuf",
                      &bytes));
  struct hccl_op o = {.kind = HCCL_K_SCATTER,
                      .send = sendBuf,
                      .recv = recvBuf,
                      .count = recvCount,
                      .dt = dataType,
                      .root = root,
                      .bytes = bytes};
  return submit(comm, &o, request);
}

HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
                        const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
                        HcclComm comm, HcclRequest *request) {
  const char *fn = "HcclAlltoAll";
  HCCL_TRY(check_call(comm, fn));
  HCCL_TRY(check_dtype(comm, fn, sendType));
  HCCL_TRY(check_dtype(comm, fn, recvType));
  size_t sb = 0, rb = 0;
  HCCL_TRY(check_bufs(comm, fn, sendCount, sendType, comm->nranks, sendBuf, recvBuf, "sendBuf",
                      "recvBuf", &sb));
  HCCL_TRY(check_bufs(comm, fn, recvCount, recvType, comm->nranks, sendBuf, recvBuf, "sendBuf",
                      "recvBuf", &rb));
  if (sb != rb)
    return hccl__fail(HCCL_E_PARA,
                      "%s on rank %u: sendCount %llu x %s is %zu bytes but recvCount %llu x %s "
                      "is %zu; every block sent must be the size of every block received",
                      fn, comm->rank, (unsigned long long)sendCount, hccl__dtype_name(sendType), sb,
                      (unsigned long long)recvCount, hccl__dtype_name(recvType), rb);
  struct hccl_op o = {.kind = HCCL_K_ALLTOALL,
                      .send = sendBuf,
                      .recv = (void *)recvBuf,
                      .count = sendCount,
                      .dt = sendType,
                      .bytes = sb,
                      .recv_count = recvCount,
                      .recv_dt = recvType};
  return submit(comm, &o, request);
}

/* One side's counts and displacements of an alltoallv: every block fits in size_t bytes, and
 * a NULL buffer has only empty blocks. */
static HcclResult check_v(struct hccl_comm *c, const char *fn, const void *buf, const char *name,
                          const uint64_t *counts, const uint64_t *displs, const char *cname,
                          const char *dname, HcclDataType dt) {
  size_t esz = hccl__dtype_size(dt);
  for (uint32_t j = 0; j < c->nranks; j++) {
    if (counts[j] > SIZE_MAX / esz || displs[j] > SIZE_MAX / esz - counts[j])
      return hccl__fail(HCCL_E_PARA,
                        "%s on rank %u: %s[%u] = %llu with %s[%u] = %llu of %s is too large for "
                        "this machine",
                        fn, c->rank, cname, j, (unsigned long long)counts[j], dname, j,
                        (unsigned long long)displs[j], hccl__dtype_name(dt));
    if (counts[j] && !buf)
      return hccl__fail(HCCL_E_PTR, "%s on rank %u: %s is NULL with %s[%u] = %llu", fn, c->rank,
                        name, cname, j, (unsigned long long)counts[j]);
  }
  return HCCL_SUCCESS;
}

HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
                         HcclDataType sendType, const void *recvBuf, const void *recvCounts,
                         const void *rdispls, HcclDataType recvType, HcclComm comm,
                         HcclRequest *request) {
  const char *fn = "HcclAlltoAllV";
  HCCL_TRY(check_call(comm, fn));
  const void *arrays[4] = {sendCounts, sdispls, recvCounts, rdispls};
  static const char *const names[4] = {"sendCounts", "sdispls", "recvCounts", "rdispls"};
  for (int i = 0; i < 4; i++)
    if (!arrays[i])
      return hccl__fail(HCCL_E_PTR, "%s on rank %u: %s is NULL", fn, comm->rank, names[i]);
  HCCL_TRY(check_dtype(comm, fn, sendType));
  HCCL_TRY(check_dtype(comm, fn, recvType));
  const uint64_t *sc = sendCounts, *sd = sdispls, *rc = recvCounts, *rd = rdispls;
  HCCL_TRY(check_v(comm, fn, sendBuf, "sendBuf", sc, sd, "sendCounts", "sdispls", sendType));
  HCCL_TRY(check_v(comm, fn, recvBuf, "recvBuf", rc, rd, "recvCounts", "rdispls", recvType));
  uint32_t me = comm->rank;
  size_t sb = sc[me] * hccl__dtype_size(sendType), rb = rc[me] * hccl__dtype_size(recvType);
  if (sb != rb)
    return hccl__fail(HCCL_E_PARA,
                      "%s on rank %u: sendCounts[%u] = %llu x %s is %zu bytes but recvCounts[%u] "
                      "= %llu x %s is %zu; what a rank sends itself must be what it receives",
                      fn, me, me, (unsigned long long)sc[me], hccl__dtype_name(sendType), sb, me,
                      (unsigned long long)rc[me], hccl__dtype_name(recvType), rb);
  /* One array, so a queued call copies and frees it in one piece. */
  size_t n = comm->nranks;
  uint64_t *v = malloc(4 * n * sizeof(uint64_t));
  if (!v) return hccl__fail(HCCL_E_MEMORY, "%s on rank %u: out of memory", fn, me);
  for (int i = 0; i < 4; i++)
    memcpy(v + i * n, arrays[i], n * sizeof(uint64_t));
  struct hccl_op o = {.kind = HCCL_K_ALLTOALLV,
                      .send = sendBuf,
                      .recv = (void *)recvBuf,
                      .dt = sendType,
                      .recv_dt = recvType,
                      .v = v};
  HcclResult r = submit(comm, &o, request);
  free(v);
  return r;
}

