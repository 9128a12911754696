/*
 * transport.c - the transports in priority order (transport.h): the first whose can_connect
 * accepts a peer carries it. Shared memory inside a server; between servers RDMA where both
 * ranks have an active port (and the build found <infiniband/verbs.h>), else TCP.
 */
#include "transport.h"

const struct hccl_transport_ops *const hccl__transports[] = {&hccl__transport_shm,
#ifdef HCCL_HAVE_RDMA
                                                             &hccl__transport_rdma,
#endif
                                                             &hccl__transport_tcp, NULL};
