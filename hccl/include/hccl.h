/*
 * hccl.h - the one public header of libhccl, a collective-communication library.
 *
 * The names, types and numbering follow Huawei's HCCL so that code written for it reads the
 * same here: a communicator is made from a root info (HcclGetRootInfo on rank 0, shared out of
 * band, HcclCommInitRootInfo on every rank) or from the variables a launcher sets
 * (HcclCommInitFromEnv), and collectives take (buffers, count, dtype, op, comm).
 *
 * Where HCCL passes an accelerator stream as the last argument, this library takes an
 * HcclRequest pointer: NULL runs the call to completion on the calling thread (blocking);
 * a non-NULL pointer queues the call, returns at once and stores a request to test or wait
 * on. Calls on one communicator run in the order they were made, whichever form they take.
 *
 * Every call that can fail returns an HcclResult. The first place that sees a failure logs
 * one line naming the value and the rule; HcclGetLastErrorMessage() returns that line to the
 * calling thread. After a collective fails (timeout, dead peer) the communicator is unusable
 * and must be destroyed, as with NCCL's asynchronous errors.
 *
 * Ranks must make the same collective calls in the same order with the same count, data
 * type, reduction and root. Each message carries its call's fingerprint, so a difference fails
 * on every rank before any data is mixed (HCCL_E_PARA where it is seen, HCCL_E_REMOTE on the
 * others), and every rank's message names both ranks, both calls and the fields that differ. A rank whose own part of the call was complete and right (a
 * broadcast's root whose receivers agree with it) may finish that call; its next call fails.
 *
 * A communicator is used by one thread at a time.
 */
#ifndef HCCL_H
#define HCCL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Public symbols are the only ones libhccl.so exports. */
#if defined(__GNUC__)
#define HCCL_API __attribute__((visibility("default")))
#else
#define HCCL_API
#endif

#define HCCL_VERSION_MAJOR 0
#define HCCL_VERSION_MINOR 1
#define HCCL_VERSION_PATCH 0

/* One list gives every result its number, name and message (HCCL's numbering). */
#define HCCL_RESULT_MAP(X)                                                                         \
  X(HCCL_SUCCESS, 0, "success")                                                                    \
  X(HCCL_E_PARA, 1, "invalid argument")                                                            \
  X(HCCL_E_PTR, 2, "null pointer")                                                                 \
  X(HCCL_E_MEMORY, 3, "out of memory")                                                             \
  X(HCCL_E_INTERNAL, 4, "internal error")                                                          \
  X(HCCL_E_NOT_SUPPORT, 5, "not supported")                                                        \
  X(HCCL_E_NOT_FOUND, 6, "not found")                                                              \
  X(HCCL_E_UNAVAIL, 7, "resource unavailable")                                                     \
  X(HCCL_E_SYSCALL, 8, "system call failed")                                                       \
  X(HCCL_E_TIMEOUT, 9, "timed out")                                                                \
  X(HCCL_E_OPEN_FILE_FAILURE, 10, "cannot open file")                                              \
  X(HCCL_E_TCP_CONNECT, 11, "TCP connection failed")                                               \
  X(HCCL_E_ROCE_CONNECT, 12, "RDMA connection failed")                                             \
  X(HCCL_E_TCP_TRANSFER, 13, "TCP transfer failed")                                                \
  X(HCCL_E_ROCE_TRANSFER, 14, "RDMA transfer failed")                                              \
  X(HCCL_E_RUNTIME, 15, "runtime error")                                                           \
  X(HCCL_E_NETWORK, 19, "network error")                                                           \
  X(HCCL_E_AGAIN, 20, "try again")                                                                 \
  X(HCCL_E_REMOTE, 21, "a peer rank failed")

typedef enum {
#define HCCL__RESULT_ENUM(name, num, msg) name = num,
  HCCL_RESULT_MAP(HCCL__RESULT_ENUM)
#undef HCCL__RESULT_ENUM
      HCCL_E_RESERVED
} HcclResult;

/* Element types (HCCL's numbering). Every collective takes every type; reductions of INT8,
 * INT32, FP16 and FP32 are the card's original four, the others are reduced as HCCL's later
 * releases and NCCL do (precision: docs/design.md, "Precision"). */
typedef enum {
  HCCL_DATA_TYPE_INT8 = 0,
  HCCL_DATA_TYPE_INT16 = 1,
  HCCL_DATA_TYPE_INT32 = 2,
  HCCL_DATA_TYPE_FP16 = 3,
  HCCL_DATA_TYPE_FP32 = 4,
  HCCL_DATA_TYPE_INT64 = 5,
  HCCL_DATA_TYPE_UINT64 = 6,
  HCCL_DATA_TYPE_UINT8 = 7,
  HCCL_DATA_TYPE_UINT16 = 8,
  HCCL_DATA_TYPE_UINT32 = 9,
  HCCL_DATA_TYPE_FP64 = 10,
  HCCL_DATA_TYPE_BFP16 = 11,
  HCCL_DATA_TYPE_RESERVED
} HcclDataType;

/* Reductions. SUM, PROD, MAX and MIN are HCCL's; AVG (NCCL's ncclAvg: the sum divided by the
 * number of ranks, rounded toward zero on integer types) and the bitwise BAND, BOR and BXOR
 * (integer types only, as gloo's) are libhccl's own. A pre-multiplied sum (NCCL's
 * ncclRedOpCreatePreMulSum) is an op made at run time: HcclRedOpCreatePreMulSum. */
typedef enum {
  HCCL_REDUCE_SUM = 0,
  HCCL_REDUCE_PROD = 1,
  HCCL_REDUCE_MAX = 2,
  HCCL_REDUCE_MIN = 3,
  HCCL_REDUCE_AVG = 4,
  HCCL_REDUCE_BAND = 5,
  HCCL_REDUCE_BOR = 6,
  HCCL_REDUCE_BXOR = 7,
  HCCL_REDUCE_RESERVED
} HcclReduceOp;
/* Defined where HCCL_REDUCE_AVG, the bitwise ops and HcclRedOpCreatePreMulSum exist. */
#define HCCL_HAVE_REDUCE_AVG 1

/* Where HcclRedOpCreatePreMulSum's scalar lives (NCCL's ncclScalarResidence_t): read once,
 * when the op is made, or read by each call that uses the op, when the call starts (a queued
 * call reads it when it is submitted). */
typedef enum {
  HCCL_SCALAR_HOST_IMMEDIATE = 0,
  HCCL_SCALAR_PER_CALL = 1
} HcclScalarResidence;

/* Opaque bootstrap address made by rank 0 and copied to every rank out of band. */
#define HCCL_ROOT_INFO_BYTES 4108
typedef struct {
  char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

typedef struct hccl_comm *HcclComm;
typedef struct hccl_request *HcclRequest;

/* ---- results ---- */

/* Short, static text for a result ("timed out"); never NULL. */
HCCL_API const char *HcclGetErrorString(HcclResult code);
/* The full message of the last failure on this thread (names the value and the rule), or ""
 * when none. Valid until the thread's next failing call. */
HCCL_API const char *HcclGetLastErrorMessage(void);

/* ---- communicators ---- */

/* Rank 0 only: starts the bootstrap store in this process and fills *rootInfo with its
 * address. The store listens on HCCL_IF_IP if set, else on MASTER_ADDR if set, else on
 * 127.0.0.1, on an ephemeral port. */
HCCL_API HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);

/* Collective over nRanks processes: each calls it with its rank in [0, nRanks). Blocks until
 * every rank has joined or HCCL_CONNECT_TIMEOUT passes. Rank 0 must be the process that
 * called HcclGetRootInfo. On success *comm is set; on failure it is untouched. */
HCCL_API HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo,
                                         uint32_t rank, HcclComm *comm);

/* Like HcclCommInitRootInfo, with rank and size read from the launcher's variables
 * (RANK/WORLD_SIZE, else RANK_ID/RANK_SIZE) and the meeting point from MASTER_ADDR and
 * MASTER_PORT, where rank 0 serves the bootstrap store. A process with none of these
 * variables gets a communicator of one rank. */
HCCL_API HcclResult HcclCommInitFromEnv(HcclComm *comm);

/* Frees everything the communicator holds. Not collective: a rank may destroy its
 * communicator after a failure while its peers are gone. Queued calls are finished first (each
 * bounded by HCCL_EXEC_TIMEOUT); requests not yet waited for are freed and must not be used
 * afterwards. NULL is accepted. */
/* HCCL's rank-table init: clusterInfo is the path of a "version 1.0" rank table (JSON:
 * server_list[].server_id, device[].device_id/rank_id; see docs/starting.md) and rank this
 * process's rank_id in it. Ranks meet at the server_id of rank 0's server, on MASTER_PORT or
 * else HCCL_IF_BASE_PORT (60000). Every error in the table names the field and the value.
 * HcclCommInitFromEnv does the same when RANK_TABLE_FILE is set, with RANK_ID as the rank. */
HCCL_API HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank,
                                            HcclComm *comm);

HCCL_API HcclResult HcclCommDestroy(HcclComm comm);

/* Ends the communicator's work at once, as ncclCommAbort does: every call in progress or queued
 * on it, on any thread, fails with HCCL_E_REMOTE ("aborted by HcclCommAbort on rank r"); every
 * peer's current or next call fails the same way; later calls are refused with that reason.
 * Safe to call from any thread while others are inside calls on comm, and more than once. The
 * communicator must still be destroyed with HcclCommDestroy, once no thread is inside a call
 * on it; that frees everything. */
HCCL_API HcclResult HcclCommAbort(HcclComm comm);

/* HCCL's HcclGetCommAsyncError (NCCL's ncclCommGetAsyncError): *asyncError is HCCL_SUCCESS
 * while comm works, else the code that broke it (a failed or timed-out call, a peer's failure,
 * HcclCommAbort); HcclGetLastErrorMessage is not changed. It waits for nothing. */
HCCL_API HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError);

HCCL_API HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);
HCCL_API HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);
/* The logical device this rank drives: see HcclSetDevice for the rule. */
HCCL_API HcclResult HcclGetDeviceId(HcclComm comm, int32_t *deviceId);

/* The device this process drives, for communicators made after the call (the role of
 * aclrtSetDevice, torch.npu.set_device; torch_hccl.set_device calls it). A rank's device is,
 * in order: this; else DEVICE_ID, ASCEND_DEVICE_ID or the launcher's local rank variable
 * (LOCAL_RANK, SLURM_LOCALID, ...), read only when they were set for this process, i.e. the
 * launcher's rank variable names the rank the communicator is made for (HcclCommInitFromEnv:
 * always); else the rank's index among the ranks on its server. Devices on one server must
 * differ. HCCL_E_PARA for an id outside 0..2^20. */
HCCL_API HcclResult HcclSetDevice(int32_t deviceId);
/* The device HcclSetDevice set in this process, or -1. */
HCCL_API HcclResult HcclGetDevice(int32_t *deviceId);
/* Ranks on this rank's server, and this rank's index among them. */
HCCL_API HcclResult HcclGetLocalRankSize(HcclComm comm, uint32_t *localSize);
HCCL_API HcclResult HcclGetLocalRankId(HcclComm comm, uint32_t *localRank);

/* Settings of one communicator that override the environment's (HCCL_* variables) for it
 * alone, as HCCL's HcclCommConfig does. Fill with HcclCommConfigInit, then set fields; a zero
 * or empty field means "from the environment". */
typedef struct {
  size_t size;              /* sizeof(HcclCommConfig): set by HcclCommConfigInit */
  uint32_t bufferSizeMB;    /* HCCL_BUFFSIZE for this communicator */
  int64_t connectTimeoutMs; /* HCCL_CONNECT_TIMEOUT, in milliseconds */
  int64_t execTimeoutMs;    /* HCCL_EXEC_TIMEOUT, in milliseconds: one deadline per call, from
                             * the moment it starts running, for all of its waits */
  char commName[64];        /* shown in this communicator's log lines ("" = none) */
  /* Where connectTimeoutMs and execTimeoutMs came from, as the user set them: a timeout's
   * message names it so the user knows what to raise ("timeout= of init_process_group",
   * torch_hccl's). "" names the field itself ("HcclCommConfig.execTimeoutMs" or
   * ".connectTimeoutMs"). Read only for a timeout set non-zero here. */
  char timeoutSource[64];
} HcclCommConfig;

HCCL_API void HcclCommConfigInit(HcclCommConfig *config);

/* A rendezvous store the caller owns (torch's c10d store, a job scheduler's KV store): the
 * bootstrap meets its peers through it instead of a server of its own, so no port is opened.
 * Only small bootstrap records go through it; data never does. Keys are "<prefix>/..." where
 * the prefix is unique per communicator made over the store. The library never frees ctx. */
typedef struct {
  void *ctx;
  /* Sets key to a copy of val[0..len). */
  HcclResult (*set)(void *ctx, const char *key, const void *val, size_t len);
  /* Waits up to timeoutMs for key, then stores a malloc'd copy of its value in *val (the
   * library frees it) and its length in *len. HCCL_E_TIMEOUT when the key did not appear;
   * any other failure code when the store itself failed. */
  HcclResult (*get)(void *ctx, const char *key, void **val, size_t *len, int64_t timeoutMs);
} HcclStore;

/* Collective over nRanks processes that share `store`; each calls it with its rank. Blocks
 * until every rank has joined or the connect timeout passes. config may be NULL. The same
 * checks as HcclCommInitRootInfo apply (the topology's rules, matching settings). */
HCCL_API HcclResult HcclCommInitStore(const HcclStore *store, uint32_t nRanks, uint32_t rank,
                                      const HcclCommConfig *config, HcclComm *comm);

/* HcclCommShrink's flags, as NCCL's NCCL_SHRINK_*. DEFAULT: comm is healthy and has no call in
 * progress (a planned exclusion). ABORT: first HcclCommAbort(comm), so a call stuck waiting
 * for a dead rank fails at once; comm is then unusable (destroy it). */
#define HCCL_SHRINK_DEFAULT 0
#define HCCL_SHRINK_ABORT 1

/* NCCL's ncclCommShrink: a new communicator of comm's ranks without excludeRanks[0..count),
 * the others renumbered in their order (rank r becomes r minus the excluded ranks below it).
 * Collective over the survivors: every rank not excluded calls it with the same list (in any
 * order); excluded ranks do not call it and are never waited for. The survivors meet where
 * comm's ranks met, under keys of their own: rank 0's store again (rank 0 serves it anew at
 * the same address and port) or the caller's store for HcclCommInitStore, which must still
 * work. So excluding rank 0 of a communicator made by root info, environment or rank table is
 * HCCL_E_UNAVAIL (its store died with it): make such jobs with HcclCommInitStore over a store
 * that outlives rank 0 (torch's). config NULL: comm's settings; else its non-zero fields
 * replace them. Errors, each one log line naming the value: HCCL_E_PARA for a rank out of
 * range, a rank listed twice, the caller listed, a bad flag, or survivors whose lists differ
 * (found on every survivor that meets one); HCCL_E_TIMEOUT naming the survivor that did not
 * call within the connect timeout. comm itself stays the caller's to destroy. */
HCCL_API HcclResult HcclCommShrink(HcclComm comm, const int *excludeRanks, int excludeCount,
                                   HcclComm *newcomm, const HcclCommConfig *config,
                                   int shrinkFlags);

/* Not in any group of an HcclCommSplit: that rank's *newcomm is set to NULL. */
#define HCCL_SPLIT_NOCOLOR (-1)

/* Makes communicators from a parent by colour and key, as ncclCommSplit does: collective over
 * every rank of comm (each calls it once, in the same order as its other calls on comm); the
 * ranks that pass the same color >= 0 form one new communicator, ordered by key (>= 0; ties by
 * their rank in comm), and *newcomm is this rank's; a negative color (HCCL_SPLIT_NOCOLOR) joins
 * none and gets NULL. config may be NULL (the parent's settings); its non-zero fields apply to
 * the new communicator, and every rank of one colour must give the same values.
 *
 * The bootstrap runs over comm, never a store: one round over comm of every rank's colour,
 * key and bootstrap record (over the tree of sockets comm's own bootstrap made and kept: a
 * gather up it and the table down; a communicator made by a split has no tree and runs an
 * allgather on its links instead), then, for a group with members sharing a server, its own
 * two rounds among its members only, over comm's links. Calls queued on comm end first, and
 * no other call on comm runs meanwhile; the round waits at most HCCL_EXEC_TIMEOUT.
 * No store server is met, however many groups a job makes. The new communicator then has links of its
 * own and is a full communicator (every call, HcclCommAbort, HcclCommDestroy) independent of
 * comm: either may be used while the other is, and destroyed first.
 *
 * Errors, on every rank of comm alike: HCCL_E_PARA for a key below 0 or an invalid config on
 * any rank, or ranks at different splits of comm (the message names the rank and the value);
 * HCCL_E_REMOTE when comm is broken or aborted; a new communicator's own checks (the
 * topology's rules: any count per server on a flat one, 1, 2, 4 or 8 under ascend910; matching
 * settings) fail every rank of its colour.
 *
 * Why NCCL's shape and not HCCL's HcclCreateSubCommConfig(comm, rankNum, rankIds, subCommId,
 * subCommRankId, config, subComm): HCCL's is called by the new group's members only, so it
 * cannot use the parent's collectives (the other ranks are not there), and each rank list
 * must be agreed out of band; colour and key need nothing but the call, make every group of
 * a layout in one collective call, and are what torch's split_group and new_group ask for.
 * HcclCreateSubCommConfig's subset form needs a meeting among the members alone (a store
 * round, as HcclCommInitStore does), which is what this call avoids. */
HCCL_API HcclResult HcclCommSplit(HcclComm comm, int32_t color, int32_t key, HcclComm *newcomm,
                                  const HcclCommConfig *config);

/* The most HcclCommSplit calls one group (HcclGroupStart..HcclGroupEnd) may hold. */
#define HCCL_GROUP_MAX_SPLITS 8

/* Several splits of one parent in one parent round, as NCCL users write them:
 *
 *   HcclGroupStart();
 *   HcclCommSplit(world, tp_colour, tp_key, &tp, NULL);
 *   HcclCommSplit(world, dp_colour, dp_key, &dp, NULL);
 *   HcclGroupEnd();      // tp and dp are valid from here on, as NCCL's nonblocking groups
 *
 * Inside a group HcclCommSplit only records the request (and refuses its own bad input at
 * once, as it would alone); HcclGroupEnd runs ONE round over the parent carrying every
 * request's colour and key and this rank's bootstrap record once, then makes each split's
 * communicator in call order. Why: with many servers a parent round waits for every rank, so
 * a layout's three splits pay one instead of three. A
 * split (grouped or not) whose members are each on a server of its own needs nothing more: its
 * listeners' addresses ride in that round and its links are made on first use (NCCL's
 * runtime connect), so a member whose own setup failed after that round is reported by the
 * first collective (a dial that times out after HCCL_CONNECT_TIMEOUT, naming the peer); a
 * split with members sharing a server still runs its members' two rounds and links at once.
 * The group belongs to the calling thread.
 *
 * Rules, each refused by name: only HcclCommSplit may be called inside a group (a collective,
 * a send or receive, HcclCommInit*, HcclCommShrink or HcclCommDestroy there is
 * HCCL_E_NOT_SUPPORT; getters and HcclCommAbort are allowed); groups do not nest
 * (HcclGroupStart inside one is HCCL_E_NOT_SUPPORT); HcclGroupEnd without HcclGroupStart is
 * HCCL_E_PARA; every split of a group has the same parent, and a group holds at most
 * HCCL_GROUP_MAX_SPLITS (HCCL_E_PARA at that split, and the group fails). Every rank of the
 * parent must make the same number of splits in the group: otherwise, or when any rank's
 * split was refused, HcclGroupEnd fails on every rank with HCCL_E_PARA naming the rank, and
 * makes nothing. A split whose own group's checks fail (see HcclCommSplit) leaves its
 * *newcomm NULL and HcclGroupEnd returns that error; the group's other splits are still made
 * (and are the caller's to destroy). An empty group does nothing. */
HCCL_API HcclResult HcclGroupStart(void);
HCCL_API HcclResult HcclGroupEnd(void);

/* ---- collectives ----
 * In-place is allowed where NCCL allows it: sendBuf == recvBuf for allreduce and reduce;
 * sendBuf == recvBuf + rank * count * size for allgather; and
 * recvBuf == sendBuf + rank * recvCount * size for reduce-scatter.
 * A count of 0 is valid and moves nothing (it still synchronises nothing: it returns at once
 * on every rank). The last argument: NULL blocks; non-NULL returns a request. */

HCCL_API HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count,
                                  HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                  HcclRequest *request);
HCCL_API HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
                                  HcclComm comm, HcclRequest *request);
/* recvBuf holds nRanks * sendCount elements, rank r's at offset r * sendCount. */
HCCL_API HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount,
                                  HcclDataType dataType, HcclComm comm, HcclRequest *request);
/* sendBuf holds nRanks * recvCount elements; rank r receives the reduction of block r. */
HCCL_API HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                                      HcclDataType dataType, HcclReduceOp op, HcclComm comm,
                                      HcclRequest *request);
/* recvBuf is written on root only (it may be NULL elsewhere). */
HCCL_API HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
                               HcclReduceOp op, uint32_t root, HcclComm comm, HcclRequest *request);
HCCL_API HcclResult HcclBarrier(HcclComm comm, HcclRequest *request);

/* Messages in the user's words. A framework over libhccl may pass its users' data as other
 * element types (torch_hccl: a broadcast of any tensor as bytes, a complex tensor as float
 * pairs); a mismatch between ranks' calls would then be named in the library's terms
 * ("broadcast (count 4000, int8)") instead of the user's ("count 1000, torch.float32"). So
 * the framework names its own element types once per process, and before each collective call
 * says which of them its user passed. The type's code travels in the call's fingerprint, so
 * the rank that finds a mismatch names every rank's call in its user's terms: the type's name,
 * and the count in its elements (the call's bytes / size). Calls made without a type are named
 * as made (a C caller's own HcclDataType and count). A differing type is a mismatch like any
 * other (the same bytes as float32 on one rank and int32 on another).
 *
 * HcclSetUserTypes: the framework's types, code i being types[i] (count at most 255); names
 * are copied (up to 31 bytes each), size is bytes per element (1 or more). Every rank must
 * name the same types with the same codes. Once per process: HCCL_E_PARA when called again
 * with another list, for a size of 0, or for a count above 255; HCCL_E_PTR for a NULL name.
 * Not thread-safe against collective calls. */
typedef struct {
  const char *name; /* as the framework's users write it: "torch.float32" */
  uint32_t size;    /* bytes per element */
} HcclUserType;
HCCL_API HcclResult HcclSetUserTypes(const HcclUserType *types, uint32_t count);
/* The type (a code of HcclSetUserTypes) this thread's user passed to the next collective call
 * this thread makes (HcclAllReduce ... HcclAlltoAllV, HcclBarrier), which takes it whether it
 * succeeds or is refused. HCCL_E_PARA for a code HcclSetUserTypes did not name. */
HCCL_API HcclResult HcclSetCallUserType(uint32_t code);

/* A reduction op for this communicator's reducing calls (NCCL's ncclRedOpCreatePreMulSum):
 * the sum of the inputs, multiplied by the scalar (one element of dataType at `scalar`). The
 * calls that use it must pass the same dataType, and every rank must use the same scalar in a
 * call: libhccl applies it once, to the sum (stricter than NCCL, which also allows a scalar
 * per rank), and refuses a call whose scalar differs between ranks, naming both. The scalar
 * is read now (HCCL_SCALAR_HOST_IMMEDIATE) or by each call when it is made
 * (HCCL_SCALAR_PER_CALL: `scalar` must stay valid until the op is destroyed). A call takes
 * what it needs when it is made, so the op may be destroyed while calls that use it are
 * queued. Not thread-safe against other calls on the same communicator. */
HCCL_API HcclResult HcclRedOpCreatePreMulSum(HcclReduceOp *op, void *scalar, HcclDataType dataType,
                                             HcclScalarResidence residence, HcclComm comm);
/* Frees an op made by HcclRedOpCreatePreMulSum; built-in ops are refused. */
HCCL_API HcclResult HcclRedOpDestroy(HcclReduceOp op, HcclComm comm);

/* Rooted gather: recvBuf (root only; may be NULL elsewhere) receives nRanks * sendCount
 * elements, rank r's at offset r * sendCount. Any data type. */
HCCL_API HcclResult HcclGather(void *sendBuf, void *recvBuf, uint64_t sendCount,
                               HcclDataType dataType, uint32_t root, HcclComm comm,
                               HcclRequest *request);
/* Rooted scatter (HCCL's argument order): sendBuf (root only; may be NULL elsewhere) holds
 * nRanks * recvCount elements; rank r receives block r into recvBuf. Any data type. */
HCCL_API HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                                HcclDataType dataType, uint32_t root, HcclComm comm,
                                HcclRequest *request);
/* All-to-all (HCCL's argument order): rank r sends elements [j*sendCount, (j+1)*sendCount) of
 * sendBuf to rank j and receives rank j's block at j*recvCount of recvBuf. sendCount *
 * size(sendType) must equal recvCount * size(recvType). Buffers must not overlap. */
HCCL_API HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
                                 const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
                                 HcclComm comm, HcclRequest *request);
/* All-to-all with per-peer counts (HCCL's argument order): sendCounts, sdispls, recvCounts
 * and rdispls point to nRanks uint64_t each, in elements; the arrays are copied at the call.
 * What rank i sends to j (sendCounts[j] on i) must equal what j expects from i (recvCounts[i]
 * on j), else the call fails naming both ranks. */
HCCL_API HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
                                  HcclDataType sendType, const void *recvBuf,
                                  const void *recvCounts, const void *rdispls,
                                  HcclDataType recvType, HcclComm comm, HcclRequest *request);

/* ---- point-to-point (HCCL's names and argument order) ----
 * Sends and receives between two ranks match in the order they were made (any data type; the
 * counts must agree, else both fail naming the sizes). They travel on a channel of their own
 * and are progressed by an engine of their own, independent of collectives: a send can be
 * matched whatever collectives either rank is in, and non-blocking sends and receives posted
 * together progress together, so two ranks may both isend before they irecv, at any size. */
HCCL_API HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType,
                             uint32_t destRank, HcclComm comm, HcclRequest *request);
HCCL_API HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType,
                             uint32_t srcRank, HcclComm comm, HcclRequest *request);
/* Receives from whichever rank's send arrives first (after every earlier receive on this
 * communicator has matched); *srcRank is written before the call completes and must stay valid
 * until then. */
HCCL_API HcclResult HcclRecvAny(void *recvBuf, uint64_t count, HcclDataType dataType,
                                uint32_t *srcRank, HcclComm comm, HcclRequest *request);

/* ---- requests ---- */

/* *done = 1 once the call has finished (then HcclRequestWait returns at once). */
HCCL_API HcclResult HcclRequestTest(HcclRequest request, int *done);
/* Waits for the call to finish, frees the request and returns the call's result. When the
 * call has not started and every earlier call has finished, the waiting thread runs it itself
 * instead of waking the worker. Requests may be tested and waited for from any thread (each
 * request by one waiter). */
HCCL_API HcclResult HcclRequestWait(HcclRequest request);

/* ---- memory the ranks of a server share (as NCCL's ncclMemAlloc) ---- */

/* Allocates `size` bytes (page-aligned, zero-filled) that the other ranks of this server can
 * map. An allreduce, reduce-scatter, allgather or broadcast on a communicator inside one server
 * whose buffers on every rank lie in such memory (at any offset), and whose larger buffer has
 * at least 64 KiB, runs zero-copy unless HCCL_ALGO is set: each rank reduces or copies its
 * share straight from the ranks' inputs into their outputs, reading each input byte and
 * writing each output byte once. Across servers, the two-level allreduce's steps inside each
 * server run so where that server's ranks all pass such memory. Where any rank's buffer is
 * ordinary memory the call runs as before. Zero-copy reductions keep the ring's order, so they
 * give the ring's bits. Fails with HCCL_E_PARA for size 0 and HCCL_E_MEMORY when the system
 * refuses. After fork the child's copy of each region is copy-on-write, as malloc'd memory:
 * its writes stay its own, and the region is ordinary memory to the child's collectives.
 * Unlike malloc, a page the child has not written yet shows the parent's later writes to it. */
HCCL_API HcclResult HcclMemAlloc(void **ptr, size_t size);
/* Frees what HcclMemAlloc returned; NULL is accepted, any other pointer is HCCL_E_PARA. Peers
 * that mapped it keep their mapping until their communicator is destroyed or needs the room
 * (at most 8 per peer), so the pages are returned to the system then. */
HCCL_API HcclResult HcclMemFree(void *ptr);
/* Gives the whole pages inside [ptr, ptr + size) of one HcclMemAlloc region back to the system
 * (a caching allocator's free blocks: torch_hccl's empty_cache); they read as zeros when next
 * touched, here and in the peers that mapped the region. Use it rather than madvise on such
 * memory: the RDMA transport registers these regions with the device, which keeps the old
 * pages, and this drops those registrations first. HCCL_E_PARA for a range outside one region
 * (or in one a fork made private); HCCL_E_SYSCALL when the system refuses. */
HCCL_API HcclResult HcclMemDiscard(void *ptr, size_t size);

/* ---- introspection (tests and tools) ---- */

/* The algorithm the cost model (or HCCL_ALGO) picks for an allreduce of `bytes` on this
 * communicator: "ring" or "hd" (recursive halving-doubling) over every rank, or, on a
 * communicator that spans servers, "hier-ring" or "hier-hd" (two-level: inside each server,
 * then ring or halving-doubling between servers; on servers of different counts, through
 * each server's first rank), or "oneshot" (one server: every rank reads
 * every rank's input after one synchronisation; small messages, or HCCL_ALGO=oneshot). Static
 * string. It does not see buffers: an
 * allreduce whose buffers are HcclMemAlloc memory on every rank may run zero-copy instead (its
 * trace event says "zero-copy", or for a two-level allreduce "zero-copy inside servers"), and
 * one of 64 KiB or more of other buffers on 4 or more ranks of a server runs staged ("staged",
 * or "staged inside servers"). */
HCCL_API const char *HcclAllReduceAlgoName(HcclComm comm, uint64_t bytes);

/* What one transport of comm has moved so far, counted on this rank since the communicator was
 * made (the perf programs print RDMA's after their table: docs/perf_programs.md). Where the
 * transport copies bytes on their way, so it can say what zero copy saved: */
typedef struct {
  uint32_t links;           /* links this rank has over the transport (a peer and a channel
                             * each) */
  uint64_t bytesSent;       /* payload bytes this rank sent over them */
  uint64_t bytesCopiedSend; /* of those, bytes staged in a send slot first (the caller's copy
                             * or reduction wrote them there) instead of read from its buffer */
  uint64_t bytesCopiedRecv; /* payload bytes this rank received into a receive slot, which the
                             * caller then copied or reduced from, instead of into its buffer */
} HcclTransportStats;
/* transport: "rdma" (the transport between servers over libibverbs), "tcp" or "shm". Over RDMA
 * a buffer in HcclMemAlloc memory is sent and received without either copy (a receive where
 * the algorithm receives in place: a broadcast above one slot, an allgather of two ranks,
 * HcclRecv); other memory, or an algorithm step that reduces, goes through slots:
 * (bytesCopiedSend + bytesCopiedRecv) / bytesSent, summed over ranks, is about 2 then. All zero where the
 * transport is not used by comm (rdma: one server, HCCL_NET=tcp, no port, or a libhccl built
 * without <infiniband/verbs.h>). HCCL_E_NOT_SUPPORT for a transport that counts nothing (tcp,
 * where the kernel copies anyway, and shm, whose slots are the transfer); HCCL_E_PARA for
 * another name; HCCL_E_PTR for a NULL argument. Never waits; may be called from any thread
 * while calls run. */
HCCL_API HcclResult HcclGetCommTransportStats(HcclComm comm, const char *transport,
                                              HcclTransportStats *stats);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_H */
