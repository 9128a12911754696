/*
 * file.h - reading a small file whole: the rank table, the whitelist and the topology files
 * are read by this one function. Shared by libhccl and npu-launch (both link hccl_topo), with
 * no logging of its own: the caller, which knows what the file is for, reports the message.
 */
#ifndef HCCL_FILE_H
#define HCCL_FILE_H

#include <stddef.h>

#include "hccl.h"

/* Reads the file at path whole into *text, a new NUL-terminated buffer of its bytes (freed
 * with free()), set only on success. A file of more than max bytes is refused. On failure
 * writes into err (errlen bytes, may be 0) a message naming the file as "<what> <path>" and
 * what went wrong, and returns HCCL_E_OPEN_FILE_FAILURE (cannot be opened or read, with
 * strerror), HCCL_E_MEMORY or HCCL_E_PARA (larger than max). Does not block beyond the reads. */
HcclResult hccl__file_read(const char *path, size_t max, const char *what, char **text, char *err,
                           size_t errlen);

#endif
