/*
 * rdma_verbs.h - libibverbs loaded at run time, as NCCL's ibvwrap does: a table of the
 * functions this transport calls, looked up with dlsym in libibverbs.so.1, so that one
 * libhccl.so runs on machines with and without it (and links no verbs library). The data
 * path's calls (ibv_post_send, ibv_post_recv, ibv_poll_cq, ibv_req_notify_cq) are static inline
 * in <infiniband/verbs.h>, calling through the device context's own ops, so they need no
 * entry. Never call the header's macros that reach a library symbol (ibv_query_port,
 * ibv_reg_mr): call the table's members, which are the symbols themselves.
 */
#ifndef HCCL_RDMA_VERBS_H
#define HCCL_RDMA_VERBS_H

#include <stddef.h>

#include <infiniband/verbs.h>

struct hccl_ibv {
  struct ibv_device **(*get_device_list)(int *num);
  void (*free_device_list)(struct ibv_device **list);
  const char *(*get_device_name)(struct ibv_device *device);
  struct ibv_context *(*open_device)(struct ibv_device *device);
  int (*close_device)(struct ibv_context *context);
  int (*query_device)(struct ibv_context *context, struct ibv_device_attr *attr);
  /* The symbol takes the older, shorter struct ibv_port_attr (a prefix of this one): the
   * caller zeroes the whole struct first. */
  int (*query_port)(struct ibv_context *context, uint8_t port, struct ibv_port_attr *attr);
  int (*query_gid)(struct ibv_context *context, uint8_t port, int index, union ibv_gid *gid);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
  int (*dealloc_pd)(struct ibv_pd *pd);
  struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access);
  int (*dereg_mr)(struct ibv_mr *mr);
  struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *context);
  int (*destroy_comp_channel)(struct ibv_comp_channel *channel);
  struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe, void *cq_context,
                              struct ibv_comp_channel *channel, int comp_vector);
  int (*destroy_cq)(struct ibv_cq *cq);
  int (*get_cq_event)(struct ibv_comp_channel *channel, struct ibv_cq **cq, void **cq_context);
  void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
  struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
  int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
  int (*destroy_qp)(struct ibv_qp *qp);
  struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
  int (*destroy_ah)(struct ibv_ah *ah);
  int (*get_async_event)(struct ibv_context *context, struct ibv_async_event *event);
  void (*ack_async_event)(struct ibv_async_event *event);
  const char *(*wc_status_str)(enum ibv_wc_status status);
  const char *(*event_type_str)(enum ibv_event_type event);
};

/* The table, loaded from `soname` ("libibverbs.so.1"; tests name others) on the first call of
 * the process that succeeds (later calls return it, whatever they name). NULL when the library
 * or one of its functions is missing, with why[len] saying which ("libibverbs.so.1 not found
 * (...)"). Thread-safe. */
const struct hccl_ibv *hccl__rdma_verbs(const char *soname, char *why, size_t len);

#endif
