/*
 * group_open.c - whether this thread is between HcclGroupStart and HcclGroupEnd, and the
 * refusal every call but HcclCommSplit gets there (hccl.h). A file (and header) of its own
 * because the calls that check it (coll.c, comm.c, comm_init.c, comm_shrink.c, p2p.c) sit below
 * comm_split.c, which keeps the group's recorded splits and uses them.
 */
#include "group_open.h"

#include "log.h"

/* As NCCL's groups, a group belongs to the thread that started it. */
static _Thread_local bool group_open;

bool hccl__group_is_open(void) { return group_open; }

void hccl__group_set_open(bool open) { group_open = open; }

HcclResult hccl__group_refuse_call(const char *fn) {
  if (!group_open) return HCCL_SUCCESS;
  return hccl__fail(HCCL_E_NOT_SUPPORT,
                    "%s between HcclGroupStart and HcclGroupEnd: a group holds only "
                    "HcclCommSplit calls; call HcclGroupEnd first",
                    fn);
}
