/*
 * group_open.h - whether this thread is between HcclGroupStart and HcclGroupEnd, and the refusal
 * every call but HcclCommSplit gets there (group_open.c). Its own header, not comm.h's: the
 * calls that check it (coll.c, comm.c, comm_init.c, comm_shrink.c, p2p.c) sit below
 * comm_split.c, which opens and closes groups and keeps their splits.
 */
#ifndef HCCL_GROUP_OPEN_H
#define HCCL_GROUP_OPEN_H

#include <stdbool.h>

#include "hccl.h"

/* HCCL_E_NOT_SUPPORT, logged naming fn, when this thread is between HcclGroupStart and
 * HcclGroupEnd (only HcclCommSplit may be called there); else HCCL_SUCCESS. */
HcclResult hccl__group_refuse_call(const char *fn);
/* Whether this thread is between HcclGroupStart and HcclGroupEnd, and its setter (comm_split.c
 * opens and closes groups). */
bool hccl__group_is_open(void);
void hccl__group_set_open(bool open);

#endif
