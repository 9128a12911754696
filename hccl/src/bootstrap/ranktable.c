/*
 * ranktable.c - parsing and checking HCCL's rank table. See ranktable.h.
 */
#include "ranktable.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file.h"
#include "log.h"

#define MAX_FILE (16u << 20)
#define MAX_RANKS 65536
/* Devices a server may list: a topology's most (HCCL_TOPO_MAX_DEVICES, topo.h). Which counts a
 * job may use is the topology's rule, applied at placement (topo/place.c): any on a flat
 * server, 1, 2, 4 or 8 on ascend910. */
#define MAX_PER_SERVER 64

/* A whole non-negative number given as a JSON number or a string of digits; -1 otherwise. */
static long long number(const cJSON *it) {
  if (cJSON_IsNumber(it)) {
    double d = it->valuedouble;
    return d >= 0 && d <= 1e15 && d == (double)(long long)d ? (long long)d : -1;
  }
  const char *s = cJSON_GetStringValue(it);
  if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 15) return -1;
  return atoll(s);
}

/* "7" / "\"x\"" / "missing": how a field's value looks, for messages. */
static void shown(const cJSON *it, char *buf, size_t len) {
  if (!it) {
    snprintf(buf, len, "missing");
    return;
  }
  char *p = cJSON_PrintUnformatted(it);
  snprintf(buf, len, "%.60s", p ? p : "?");
  free(p);
}

#define BAD(fmt, ...) hccl__fail(HCCL_E_PARA, "rank table %s: " fmt, file, __VA_ARGS__)

static HcclResult field_number(const cJSON *obj, const char *key, const char *path,
                               const char *file, long long lo, long long hi, long long *out) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
  long long v = number(it);
  char s[80];
  shown(it, s, sizeof(s));
  if (v < 0) return BAD("%s%s: %s is not a whole number", path, key, s);
  if (v < lo || v > hi) return BAD("%s%s: %lld is out of range %lld-%lld", path, key, v, lo, hi);
  *out = v;
  return HCCL_SUCCESS;
}

static HcclResult field_string(const cJSON *obj, const char *key, const char *path,
                               const char *file, const char **out) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(obj, key);
  const char *v = cJSON_GetStringValue(it);
  char s[80];
  shown(it, s, sizeof(s));
  if (!v || !*v) return BAD("%s%s: %s is not a non-empty string", path, key, s);
  *out = v;
  return HCCL_SUCCESS;
}

static HcclResult check(const cJSON *root, const char *file, struct hccl_ranktable **out) {
  const char *s;
  if (!cJSON_IsObject(root))
    return BAD("%s", "the top level must be an object {\"version\": \"1.0\", ...}");
  HCCL_TRY(field_string(root, "version", "", file, &s));
  if (strcmp(s, "1.0") != 0) return BAD("version: \"%s\" is not supported (\"1.0\")", s);
  HCCL_TRY(field_string(root, "status", "", file, &s));
  if (strcmp(s, "completed") != 0)
    return BAD("status: \"%s\": the table is not complete yet (\"completed\")", s);
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "server_list");
  int nserv = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : -1;
  if (nserv <= 0)
    return BAD("server_list: %s", nserv == 0 ? "is empty" : "is missing or not a list");
  long long count;
  HCCL_TRY(field_number(root, "server_count", "", file, 1, MAX_RANKS, &count));
  if (count != nserv)
    return BAD("server_count: %lld, but server_list has %d servers", count, nserv);
  const cJSON *first = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, 0), "device");
  int per = cJSON_IsArray(first) ? cJSON_GetArraySize(first) : -1;
  if (per < 1 || per > MAX_PER_SERVER)
    return BAD("server_list[0].device: %d devices; a server has 1 to %d", per < 0 ? 0 : per,
               MAX_PER_SERVER);
  long long n = (long long)nserv * per;
  if (n > MAX_RANKS) return BAD("%lld ranks; the limit is %d", n, MAX_RANKS);
  struct hccl_ranktable *t = calloc(1, sizeof(*t) + (size_t)n * sizeof(t->rank[0]));
  if (!t) return hccl__fail(HCCL_E_MEMORY, "out of memory for rank table %s", file);
  t->nranks = (uint32_t)n;
  t->nservers = (uint32_t)nserv;
  t->per_server = (uint32_t)per;
  for (uint32_t r = 0; r < t->nranks; r++)
    t->rank[r].device = -1;
  HcclResult res = HCCL_SUCCESS;
  for (int i = 0; i < nserv && res == HCCL_SUCCESS; i++) {
    const cJSON *srv = cJSON_GetArrayItem(list, i);
    char path[64];
    snprintf(path, sizeof(path), "server_list[%d].", i);
    const char *sid;
    if (!cJSON_IsObject(srv)) {
      res = BAD("server_list[%d]: is not an object", i);
      break;
    }
    if ((res = field_string(srv, "server_id", path, file, &sid)) != HCCL_SUCCESS) break;
    if (strlen(sid) >= sizeof(t->rank[0].server_id)) {
      /* Kept whole or not at all: cut short, two ids could become one. */
      res = BAD("%sserver_id: \"%.40s...\" has %zu characters; a host name or address has at "
                "most %zu",
                path, sid, strlen(sid), sizeof(t->rank[0].server_id) - 1);
      break;
    }
    for (int k = 0; k < i && res == HCCL_SUCCESS; k++) {
      const char *other = cJSON_GetStringValue(
          cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(list, k), "server_id"));
      if (other && strcmp(other, sid) == 0)
        res = BAD("server_list[%d].server_id: \"%s\" is also server_list[%d]'s", i, sid, k);
    }
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(srv, "device");
    int nd = cJSON_IsArray(devs) ? cJSON_GetArraySize(devs) : -1;
    if (res == HCCL_SUCCESS && nd != per)
      res = BAD("server_list[%d].device: %d devices, but server_list[0] has %d; every server "
                "must have the same number",
                i, nd < 0 ? 0 : nd, per);
    for (int d = 0; d < nd && res == HCCL_SUCCESS; d++) {
      const cJSON *dev = cJSON_GetArrayItem(devs, d);
      char dpath[96];
      snprintf(dpath, sizeof(dpath), "server_list[%d].device[%d].", i, d);
      long long dev_id, rank_id;
      if ((res = field_number(dev, "device_id", dpath, file, 0, 1023, &dev_id)) != HCCL_SUCCESS ||
          (res = field_number(dev, "rank_id", dpath, file, 0, n - 1, &rank_id)) != HCCL_SUCCESS)
        break;
      const cJSON *ip = cJSON_GetObjectItemCaseSensitive(dev, "device_ip");
      if (ip && !cJSON_IsString(ip)) {
        res = BAD("%sdevice_ip: is not a string", dpath);
        break;
      }
      for (int e = 0; e < d; e++)
        if (number(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(devs, e), "device_id")) ==
            dev_id)
          res = BAD("%sdevice_id: %lld is also server_list[%d].device[%d]'s", dpath, dev_id, i, e);
      struct hccl_ranktable_rank *rk = &t->rank[rank_id];
      if (res == HCCL_SUCCESS && rk->device >= 0)
        res = BAD("%srank_id: %lld is also server_list[%u].device[%u]'s", dpath, rank_id,
                  rk->server, rk->local_rank);
      if (res != HCCL_SUCCESS) break;
      rk->server = (uint32_t)i;
      rk->local_rank = (uint32_t)d;
      rk->device = (int32_t)dev_id;
      snprintf(rk->server_id, sizeof(rk->server_id), "%s", sid);
    }
  }
  if (res != HCCL_SUCCESS) {
    free(t);
    return res;
  }
  *out = t;
  return HCCL_SUCCESS;
}

HcclResult hccl__ranktable_parse(const char *text, const char *file, struct hccl_ranktable **out) {
  cJSON *root = cJSON_Parse(text);
  if (!root) {
    const char *at = cJSON_GetErrorPtr();
    return BAD("is not JSON (near \"%.20s\")", at ? at : "");
  }
  HcclResult r = check(root, file, out);
  cJSON_Delete(root);
  return r;
}

HcclResult hccl__ranktable_load(const char *path, struct hccl_ranktable **out) {
  char *text = NULL, err[512];
  HcclResult r = hccl__file_read(path, MAX_FILE, "rank table", &text, err, sizeof(err));
  if (r != HCCL_SUCCESS) return hccl__fail(r, "%s", err);
  r = hccl__ranktable_parse(text, path, out);
  free(text);
  return r;
}
