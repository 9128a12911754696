/*
 * transport.c - the transports in priority order (transport.h): the first whose can_connect
 * accepts a peer carries it. Shared memory inside a server, TCP between servers.
 */
#include "transport.h"

const struct hccl_transport_ops *const hccl__transports[] = {&hccl__transport_shm,
                                                             &hccl__transport_tcp, NULL};
