/*
 * rdma_verbs.c - libibverbs.so.1 opened with dlopen and its functions looked up once per
 * process (rdma_verbs.h), as NCCL's ibvwrap.cc does: the library runs where libibverbs is
 * missing, and then only the RDMA transport knows (HCCL_NET=auto quietly uses TCP; =rdma says
 * "libibverbs.so.1 not found").
 */
#include "rdma_verbs.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hccl_ibv g_ibv;
static const struct hccl_ibv *g_loaded;

#define SYM(member, name)                                                                        \
  {(void **)&t.member, name}

const struct hccl_ibv *hccl__rdma_verbs(const char *soname, char *why, size_t len) {
  pthread_mutex_lock(&g_lock);
  if (g_loaded) {
    pthread_mutex_unlock(&g_lock);
    return g_loaded;
  }
  struct hccl_ibv t;
  memset(&t, 0, sizeof(t));
  const struct {
    void **at;
    const char *name;
  } syms[] = {SYM(get_device_list, "ibv_get_device_list"),
              SYM(free_device_list, "ibv_free_device_list"),
              SYM(get_device_name, "ibv_get_device_name"),
              SYM(open_device, "ibv_open_device"),
              SYM(close_device, "ibv_close_device"),
              SYM(query_device, "ibv_query_device"),
              SYM(query_port, "ibv_query_port"),
              SYM(query_gid, "ibv_query_gid"),
              SYM(alloc_pd, "ibv_alloc_pd"),
              SYM(dealloc_pd, "ibv_dealloc_pd"),
              SYM(reg_mr, "ibv_reg_mr"),
              SYM(dereg_mr, "ibv_dereg_mr"),
              SYM(create_comp_channel, "ibv_create_comp_channel"),
              SYM(destroy_comp_channel, "ibv_destroy_comp_channel"),
              SYM(create_cq, "ibv_create_cq"),
              SYM(destroy_cq, "ibv_destroy_cq"),
              SYM(get_cq_event, "ibv_get_cq_event"),
              SYM(ack_cq_events, "ibv_ack_cq_events"),
              SYM(create_qp, "ibv_create_qp"),
              SYM(modify_qp, "ibv_modify_qp"),
              SYM(destroy_qp, "ibv_destroy_qp"),
              SYM(create_ah, "ibv_create_ah"),
              SYM(destroy_ah, "ibv_destroy_ah"),
              SYM(get_async_event, "ibv_get_async_event"),
              SYM(ack_async_event, "ibv_ack_async_event"),
              SYM(wc_status_str, "ibv_wc_status_str"),
              SYM(event_type_str, "ibv_event_type_str")};
  /* Kept open for the process's life: its providers' threads and the table may be in use by
   * any communicator. */
  void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror();
    snprintf(why, len, "%s not found (%s): install libibverbs1 (rdma-core) for RDMA", soname,
             e ? e : "dlopen failed");
    pthread_mutex_unlock(&g_lock);
    return NULL;
  }
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    *syms[i].at = dlsym(h, syms[i].name);
    if (!*syms[i].at) {
      snprintf(why, len, "%s has no %s: a libibverbs older than this library needs", soname,
               syms[i].name);
      dlclose(h);
      pthread_mutex_unlock(&g_lock);
      return NULL;
    }
  }
  g_ibv = t;
  g_loaded = &g_ibv;
  pthread_mutex_unlock(&g_lock);
  return g_loaded;
}
