/*
 * trust.c - the whitelist file and token comparison. See trust.h.
 */
#include "trust.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "log.h"

#define MAX_FILE (1u << 20)
#define MAX_ADDRS 4096

struct hccl_whitelist {
  char file[512];
  size_t n;
  struct {
    int family;
    unsigned char bytes[16];
  } addr[];
};

HcclResult hccl__whitelist_load(const char *path, struct hccl_whitelist **out) {
  char *text = NULL, err[512];
  HcclResult r = hccl__file_read(path, MAX_FILE, "whitelist (HCCL_WHITELIST_FILE)", &text, err, sizeof(err));
  if (r != HCCL_SUCCESS) return hccl__fail(r, "%s", err);
  r = hccl__whitelist_parse(text, path, out);
  free(text);
  return r;
}

HcclResult hccl__whitelist_parse(const char *text, const char *path, struct hccl_whitelist **out) {
  cJSON *root = cJSON_Parse(text);
  if (!root)
    return hccl__fail(HCCL_E_PARA,
                      "whitelist %s is not JSON; HCCL's format is "
                      "{\"host_ip\": [\"ip1\", \"ip2\"], \"device_ip\": []}",
                      path);
  HcclResult r = HCCL_SUCCESS;
  if (!cJSON_IsObject(root)) {
    r = hccl__fail(HCCL_E_PARA,
                   "whitelist %s: the top level must be an object {\"host_ip\": [...]}", path);
    goto out;
  }
  const cJSON *hosts = cJSON_GetObjectItemCaseSensitive(root, "host_ip");
  int n = cJSON_IsArray(hosts) ? cJSON_GetArraySize(hosts) : -1;
  const cJSON *item;
  cJSON_ArrayForEach(item, root) {
    if (strcmp(item->string, "host_ip") != 0 && strcmp(item->string, "device_ip") != 0) {
      r = hccl__fail(HCCL_E_PARA, "whitelist %s: unknown field '%s' (host_ip, device_ip)", path,
                     item->string);
      goto out;
    }
  }
  if (n < 0) {
    r = hccl__fail(HCCL_E_PARA, "whitelist %s: host_ip is %s; it must be a list of addresses", path,
                   hosts ? "not a list" : "missing");
    goto out;
  }
  if (n == 0 || n > MAX_ADDRS) {
    r = hccl__fail(HCCL_E_PARA, "whitelist %s: host_ip has %d addresses; it needs 1 to %d", path, n,
                   MAX_ADDRS);
    goto out;
  }
  struct hccl_whitelist *wl = calloc(1, sizeof(*wl) + (size_t)n * sizeof(wl->addr[0]));
  if (!wl) {
    r = hccl__fail(HCCL_E_MEMORY, "out of memory for whitelist %s", path);
    goto out;
  }
  snprintf(wl->file, sizeof(wl->file), "%s", path);
  int i = 0;
  cJSON_ArrayForEach(item, hosts) {
    const char *s = cJSON_GetStringValue(item);
    int ok = 0;
    if (s && inet_pton(AF_INET, s, wl->addr[i].bytes) == 1)
      wl->addr[i].family = AF_INET, ok = 1;
    else if (s && inet_pton(AF_INET6, s, wl->addr[i].bytes) == 1)
      wl->addr[i].family = AF_INET6, ok = 1;
    if (ok && wl->addr[i].family == AF_INET6 &&
        IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)wl->addr[i].bytes)) {
      /* "::ffff:10.0.0.1" is the IPv4 peer 10.0.0.1, which allows() compares as IPv4. */
      memmove(wl->addr[i].bytes, wl->addr[i].bytes + 12, 4);
      wl->addr[i].family = AF_INET;
    }
    if (!ok) {
      char *shown = cJSON_PrintUnformatted(item);
      r = hccl__fail(HCCL_E_PARA, "whitelist %s: host_ip[%d]: %s is not an IPv4 or IPv6 address",
                     path, i, shown ? shown : "?");
      free(shown);
      free(wl);
      goto out;
    }
    i++;
  }
  wl->n = (size_t)n;
  *out = wl;
out:
  cJSON_Delete(root);
  return r;
}

void hccl__whitelist_free(struct hccl_whitelist *wl) {
  free(wl);
}

const char *hccl__whitelist_file(const struct hccl_whitelist *wl) {
  return wl ? wl->file : "";
}

bool hccl__whitelist_allows(const struct hccl_whitelist *wl, const struct sockaddr *sa) {
  if (!wl) return true;
  unsigned char b[16];
  int family = sa->sa_family;
  if (family == AF_INET) {
    memcpy(b, &((const struct sockaddr_in *)sa)->sin_addr, 4);
  } else if (family == AF_INET6) {
    const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a6)) {
      family = AF_INET;
      memcpy(b, (const unsigned char *)a6 + 12, 4);
    } else {
      memcpy(b, a6, 16);
    }
  } else {
    return false;
  }
  for (size_t i = 0; i < wl->n; i++)
    if (wl->addr[i].family == family &&
        memcmp(wl->addr[i].bytes, b, family == AF_INET ? 4 : 16) == 0)
      return true;
  return false;
}

bool hccl__token_equal(const char *a, size_t alen, const char *b, size_t blen) {
  unsigned char diff = (unsigned char)(alen != blen);
  size_t n = alen < blen ? alen : blen;
  for (size_t i = 0; i < n; i++)
    diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}
