/*
 * trust.h - who may talk to a job. Two checks, both off unless asked for:
 *
 *   - the job token: a secret every rank of one job holds (HCCL_JOB_TOKEN, set by npu-launch
 *     for a one-server job, or the random job id inside a root info). A store client presents
 *     it first on every connection; a store server that has one refuses any connection that
 *     does not present the same, and one that has none refuses a client that presents one, so
 *     a process of another job on the same port is turned away, with a message saying so, and
 *     the job in progress never sees its requests.
 *   - HCCL's whitelist: with HCCL_WHITELIST_DISABLE=0, HCCL_WHITELIST_FILE names a JSON file
 *     {"host_ip": ["10.0.0.1", ...], "device_ip": [...]} (device_ip is accepted and unused, as
 *     in HCCL), and listeners accept connections only from the listed addresses.
 */
#ifndef HCCL_TRUST_H
#define HCCL_TRUST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "hccl.h"

#define HCCL_TOKEN_MAX 128

struct hccl_whitelist;

/* Reads and checks the whitelist file; every error names the file, the field and the value
 * ("whitelist /etc/w.json: host_ip[2]: '10.0.0.x' is not an IPv4 or IPv6 address"). */
HcclResult hccl__whitelist_load(const char *path, struct hccl_whitelist **out);
/* The same checks on text already read (NUL-terminated); path is only named in messages and
 * kept as the whitelist's file. hccl__whitelist_load reads the file and calls this. */
HcclResult hccl__whitelist_parse(const char *text, const char *path, struct hccl_whitelist **out);
void hccl__whitelist_free(struct hccl_whitelist *wl);
/* Whether a connection from sa may be accepted (NULL wl: every address). */
bool hccl__whitelist_allows(const struct hccl_whitelist *wl, const struct sockaddr *sa);
/* The file it was read from, for messages. */
const char *hccl__whitelist_file(const struct hccl_whitelist *wl);

/* Token comparison in time independent of where the first difference is. */
bool hccl__token_equal(const char *a, size_t alen, const char *b, size_t blen);

/* What a store server checks: token ("" = none) and whitelist (NULL = none). */
struct hccl_store_trust {
  char token[HCCL_TOKEN_MAX + 1];
  struct hccl_whitelist *whitelist;
};

#endif
