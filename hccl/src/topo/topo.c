/*
 * topo.c - server topologies: the JSON parser for topologies/<name>.json (format in
 * topologies/README.md), the built-in flat server, the placement check HCCL applies to a job's
 * device list, and the ring order that crosses between full-mesh groups as few times as
 * possible. See topo.h for the contract.
 *
 * Everything here is pure: no logging, no globals, nothing written to an output argument
 * unless the call succeeds. A failure writes one message naming the value and the rule into
 * the caller's err buffer, because the two users (libhccl and npu-launch) report errors in
 * different ways.
 */
#include "topo.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"

#ifndef HCCL_TOPO_DIR
#define HCCL_TOPO_DIR "topologies"
#endif
/* Where `cmake --install` puts them; looked in when the build tree's copy is gone. */
#ifndef HCCL_TOPO_INSTALL_DIR
#define HCCL_TOPO_INSTALL_DIR HCCL_TOPO_DIR
#endif

/* How a message tells the user to leave a topology's rules: the setting and the flag. */
#define TOPO_CHOOSE_FLAT "HCCL_TOPO_FILE=flat8, npu-launch --topology flat8"

/* A topology file larger than this is certainly not one. */
#define TOPO_MAX_FILE_BYTES (1 << 20)

static const char *const known_fields[] = {"name",
                                           "devices",
                                           "groups",
                                           "intra_group_link",
                                           "inter_group_link",
                                           "partial_jobs_within_group",
                                           "device_counts",
                                           NULL};

static HcclResult fail(char *err, size_t errlen, HcclResult code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static HcclResult fail(char *err, size_t errlen, HcclResult code, const char *fmt, ...) {
  if (err && errlen > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return code;
}

/* Writes ids (any order) as a sorted compact list into buf: "0-3", "0,2,5-7". */
static void format_ids(const int *ids, int n, char *buf, size_t len) {
  int sorted[HCCL_TOPO_MAX_DEVICES * 2];
  size_t used = 0;
  if (n > (int)(sizeof(sorted) / sizeof(sorted[0]))) n = sizeof(sorted) / sizeof(sorted[0]);
  memcpy(sorted, ids, sizeof(int) * (size_t)n);
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
      int t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  buf[0] = '\0';
  for (int i = 0; i < n;) {
    int j = i;
    while (j + 1 < n && sorted[j + 1] == sorted[j] + 1)
      j++;
    int w;
    if (j >= i + 1)
      w = snprintf(buf + used, len - used, "%s%d-%d", i ? "," : "", sorted[i], sorted[j]);
    else
      w = snprintf(buf + used, len - used, "%s%d", i ? "," : "", sorted[i]);
    if (w < 0 || (size_t)w >= len - used) return; /* truncated; still NUL-terminated */
    used += (size_t)w;
    i = j + 1;
  }
}

/* Writes ids in the order given, comma-separated, as the user typed them: "0,1,4,5". */
static void format_list(const int *ids, int n, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < n; i++) {
    int w = snprintf(buf + used, len - used, "%s%d", i ? "," : "", ids[i]);
    if (w < 0 || (size_t)w >= len - used) return;
    used += (size_t)w;
  }
}

/* The members of group g, compact ("4-7"). */
static void format_group(const struct hccl_topo *t, int g, char *buf, size_t len) {
  int members[HCCL_TOPO_MAX_DEVICES], n = 0;
  for (int d = 0; d < t->ndevices; d++)
    if (t->group_of[d] == g) members[n++] = d;
  format_ids(members, n, buf, len);
}

static bool json_int(const cJSON *item, int *out) {
  if (!cJSON_IsNumber(item)) return false;
  double v = item->valuedouble;
  if (!isfinite(v) || v != floor(v) || v < -1e9 || v > 1e9) return false;
  *out = (int)v;
  return true;
}

/* Line and column (1-based) of position pos in text. */
static void line_col(const char *text, const char *pos, int *line, int *col) {
  *line = 1;
  *col = 1;
  for (const char *p = text; *p && p < pos; p++) {
    if (*p == '\n') {
      (*line)++;
      *col = 1;
    } else {
      (*col)++;
    }
  }
}

static HcclResult parse_groups(const cJSON *groups, const char *name, struct hccl_topo *t,
                               char *err, size_t errlen) {
  if (!cJSON_IsArray(groups) || cJSON_GetArraySize(groups) == 0)
    return fail(err, errlen, HCCL_E_PARA,
                "topology %s: field 'groups' must be a non-empty array of arrays of device ids, "
                "e.g. [[0,1,2,3],[4,5,6,7]]",
                name);
  int ngroups = cJSON_GetArraySize(groups);
  if (ngroups > HCCL_TOPO_MAX_GROUPS)
    return fail(err, errlen, HCCL_E_PARA, "topology %s has %d groups; at most %d are supported",
                name, ngroups, HCCL_TOPO_MAX_GROUPS);
  for (int d = 0; d < t->ndevices; d++)
    t->group_of[d] = -1;
  int g = 0;
  for (const cJSON *grp = groups->child; grp; grp = grp->next, g++) {
    if (!cJSON_IsArray(grp) || cJSON_GetArraySize(grp) == 0)
      return fail(err, errlen, HCCL_E_PARA,
                  "topology %s: group %d must be a non-empty array of device ids", name, g);
    for (const cJSON *dev = grp->child; dev; dev = dev->next) {
      int id;
      if (!json_int(dev, &id))
        return fail(err, errlen, HCCL_E_PARA,
                    "topology %s: group %d holds a value that is not an integer device id", name,
                    g);
      if (id < 0 || id >= t->ndevices)
        return fail(err, errlen, HCCL_E_PARA,
                    "topology %s: device %d in group %d is out of range; 'devices' is %d, so ids "
                    "run 0-%d",
                    name, id, g, t->ndevices, t->ndevices - 1);
      if (t->group_of[id] == g)
        return fail(err, errlen, HCCL_E_PARA, "topology %s: device %d is listed twice in group %d",
                    name, id, g);
      if (t->group_of[id] >= 0)
        return fail(err, errlen, HCCL_E_PARA,
                    "topology %s: device %d is in group %d and in group %d; a device belongs to "
                    "exactly one group",
                    name, id, t->group_of[id], g);
      t->group_of[id] = g;
    }
  }
  for (int d = 0; d < t->ndevices; d++)
    if (t->group_of[d] < 0)
      return fail(err, errlen, HCCL_E_PARA,
                  "topology %s: device %d is in no group; every device 0-%d must be in exactly "
                  "one group",
                  name, d, t->ndevices - 1);
  t->ngroups = ngroups;
  return HCCL_SUCCESS;
}

/* "device_counts": [1, 2, 4, 8]: the counts a job may use on one server; absent: any. */
static HcclResult parse_counts(const cJSON *counts, struct hccl_topo *t, char *err,
                               size_t errlen) {
  t->counts = 0;
  if (!counts) return HCCL_SUCCESS;
  if (!cJSON_IsArray(counts) || cJSON_GetArraySize(counts) == 0)
    return fail(err, errlen, HCCL_E_PARA,
                "topology %s: field 'device_counts' must be a non-empty array of device counts, "
                "e.g. [1, 2, 4, 8] (leave it out to allow any count)",
                t->name);
  for (const cJSON *c = counts->child; c; c = c->next) {
    int k;
    if (!json_int(c, &k))
      return fail(err, errlen, HCCL_E_PARA,
                  "topology %s: 'device_counts' holds a value that is not an integer", t->name);
    if (k < 1 || k > t->ndevices)
      return fail(err, errlen, HCCL_E_PARA,
                  "topology %s: 'device_counts' holds %d; a count runs from 1 to %d (the "
                  "server's devices)",
                  t->name, k, t->ndevices);
    t->counts |= 1ull << (k - 1);
  }
  return HCCL_SUCCESS;
}

static HcclResult parse_object(const cJSON *root, struct hccl_topo *t, char *err, size_t errlen) {
  if (!cJSON_IsObject(root))
    return fail(err, errlen, HCCL_E_PARA,
                "topology document must be a JSON object with fields name, devices and groups");

  const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
  if (!name)
    return fail(err, errlen, HCCL_E_PARA, "topology document has no field 'name' (a string)");
  if (!cJSON_IsString(name) || name->valuestring[0] == '\0' ||
      strlen(name->valuestring) >= sizeof(t->name))
    return fail(err, errlen, HCCL_E_PARA,
                "topology field 'name' must be a non-empty string of at most %zu characters",
                sizeof(t->name) - 1);
  snprintf(t->name, sizeof(t->name), "%s", name->valuestring);

  for (const cJSON *f = root->child; f; f = f->next) {
    bool known = f->string[0] == '_'; /* "_comment" and the like are allowed */
    for (int i = 0; known_fields[i] && !known; i++)
      known = strcmp(f->string, known_fields[i]) == 0;
    if (!known)
      return fail(err, errlen, HCCL_E_PARA,
                  "topology %s: unknown field '%s'; the fields are name, devices, groups, "
                  "intra_group_link, inter_group_link, partial_jobs_within_group, "
                  "device_counts (and '_' comments)",
                  t->name, f->string);
  }

  const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
  if (!devices)
    return fail(err, errlen, HCCL_E_PARA,
                "topology %s has no field 'devices' (the number of devices on the server)",
                t->name);
  if (!json_int(devices, &t->ndevices) || t->ndevices < 1 || t->ndevices > HCCL_TOPO_MAX_DEVICES)
    return fail(err, errlen, HCCL_E_PARA,
                "topology %s: field 'devices' must be an integer from 1 to %d", t->name,
                HCCL_TOPO_MAX_DEVICES);

  const cJSON *groups = cJSON_GetObjectItemCaseSensitive(root, "groups");
  if (!groups)
    return fail(err, errlen, HCCL_E_PARA,
                "topology %s has no field 'groups' (arrays of device ids, e.g. [[0,1,2,3]])",
                t->name);
  HcclResult r = parse_groups(groups, t->name, t, err, errlen);
  if (r != HCCL_SUCCESS) return r;

  static const char *const link_fields[] = {"intra_group_link", "inter_group_link"};
  for (int i = 0; i < 2; i++) {
    const cJSON *link = cJSON_GetObjectItemCaseSensitive(root, link_fields[i]);
    if (link && !cJSON_IsString(link))
      return fail(err, errlen, HCCL_E_PARA, "topology %s: field '%s' must be a string like \"%s\"",
                  t->name, link_fields[i], i == 0 ? "HCCS" : "PCIe");
  }

  const cJSON *partial = cJSON_GetObjectItemCaseSensitive(root, "partial_jobs_within_group");
  t->partial_jobs_within_group = false;
  if (partial) {
    if (!cJSON_IsBool(partial))
      return fail(err, errlen, HCCL_E_PARA,
                  "topology %s: field 'partial_jobs_within_group' must be true or false", t->name);
    t->partial_jobs_within_group = cJSON_IsTrue(partial);
  }
  return parse_counts(cJSON_GetObjectItemCaseSensitive(root, "device_counts"), t, err, errlen);
}

HcclResult hccl__topo_parse(const char *json, struct hccl_topo *out, char *err, size_t errlen) {
  if (!json || !out) return fail(err, errlen, HCCL_E_PTR, "topology parse: NULL document or out");
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
  if (!root) {
    int line, col;
    const char *at = end ? end : cJSON_GetErrorPtr();
    if (!at) at = json;
    line_col(json, at, &line, &col);
    char near[24];
    size_t k = 0;
    for (; k < sizeof(near) - 1 && at[k] && at[k] != '\n'; k++)
      near[k] = at[k];
    near[k] = '\0';
    if (k == 0)
      return fail(err, errlen, HCCL_E_PARA,
                  "topology document is not valid JSON: it ends early at line %d, column %d "
                  "(unclosed object or array?)",
                  line, col);
    return fail(err, errlen, HCCL_E_PARA,
                "topology document is not valid JSON: error at line %d, column %d, near '%s'", line,
                col, near);
  }
  struct hccl_topo t;
  memset(&t, 0, sizeof(t));
  HcclResult r = parse_object(root, &t, err, errlen);
  cJSON_Delete(root);
  if (r == HCCL_SUCCESS) *out = t;
  return r;
}

HcclResult hccl__topo_load(const char *path_or_name, const char *topo_dir, struct hccl_topo *out,
                           char *err, size_t errlen) {
  if (!path_or_name || !out)
    return fail(err, errlen, HCCL_E_PTR, "topology load: NULL name or out");
  if (path_or_name[0] == '\0')
    return fail(err, errlen, HCCL_E_PARA,
                "topology name is empty; give a name such as ascend910 or a path to a .json file");
  char path[4096];
  size_t len = strlen(path_or_name);
  bool is_path = strchr(path_or_name, '/') != NULL ||
                 (len >= 5 && strcmp(path_or_name + len - 5, ".json") == 0);
  const char *dir = topo_dir ? topo_dir : HCCL_TOPO_DIR;
  if (!topo_dir && !is_path) {
    snprintf(path, sizeof(path), "%s/%s.json", HCCL_TOPO_DIR, path_or_name);
    if (access(path, R_OK) != 0) dir = HCCL_TOPO_INSTALL_DIR;
  }
  int w = is_path ? snprintf(path, sizeof(path), "%s", path_or_name)
                  : snprintf(path, sizeof(path), "%s/%s.json", dir, path_or_name);
  if (w < 0 || (size_t)w >= sizeof(path))
    return fail(err, errlen, HCCL_E_PARA, "topology path for '%s' is longer than %zu bytes",
                path_or_name, sizeof(path) - 1);

  char *text = NULL;
  HcclResult r = hccl__file_read(path, TOPO_MAX_FILE_BYTES, "topology file", &text, err, errlen);
  if (r != HCCL_SUCCESS) {
    if (!is_path && r == HCCL_E_OPEN_FILE_FAILURE)
      return fail(err, errlen, HCCL_E_NOT_FOUND,
                  "unknown topology '%s': no file %s; use a name of a file in %s (such as "
                  "ascend910 or flat8) or a path to a .json file",
                  path_or_name, path, dir);
    return r;
  }
  char inner[512];
  struct hccl_topo t;
  r = hccl__topo_parse(text, &t, inner, sizeof(inner));
  free(text);
  if (r != HCCL_SUCCESS) return fail(err, errlen, r, "%s: %s", path, inner);
  *out = t;
  return HCCL_SUCCESS;
}

void hccl__topo_flat(int ndevices, struct hccl_topo *out) {
  if (!out) return;
  if (ndevices < 1) ndevices = 1;
  if (ndevices > HCCL_TOPO_MAX_DEVICES) ndevices = HCCL_TOPO_MAX_DEVICES;
  memset(out, 0, sizeof(*out));
  snprintf(out->name, sizeof(out->name), "flat%d", ndevices);
  out->ndevices = ndevices;
  out->ngroups = 1;
  out->partial_jobs_within_group = false;
}

bool hccl__topo_count_ok(const struct hccl_topo *t, int n) {
  if (n < 1) return false;
  if (!t || t->counts == 0) return true;
  return n <= 64 && (t->counts >> (n - 1) & 1);
}

void hccl__topo_count_rule(const struct hccl_topo *t, char *buf, size_t len) {
  if (!buf || len == 0) return;
  buf[0] = '\0';
  if (!t || t->counts == 0) return;
  int k[64], m = 0;
  for (int i = 0; i < 64; i++)
    if (t->counts >> i & 1) k[m++] = i + 1;
  size_t used = 0;
  int w = snprintf(buf, len, "topology %s allows ", t->name);
  for (int i = 0; w >= 0 && (size_t)w < len - used && i < m; i++) {
    used += (size_t)w;
    w = snprintf(buf + used, len - used, "%s%d", i == 0 ? "" : (i == m - 1 ? " or " : ", "), k[i]);
  }
  if (w >= 0 && (size_t)w < len - used) used += (size_t)w;
  snprintf(buf + used, len - used,
           " devices on a server; for any count choose a flat topology (" TOPO_CHOOSE_FLAT ")");
}

HcclResult hccl__topo_check_devices(const struct hccl_topo *t, const int *devices, int n, char *err,
                                    size_t errlen) {
  if (!t || (!devices && n > 0))
    return fail(err, errlen, HCCL_E_PTR, "device check: NULL topology or device list");
  if (n <= 0)
    return fail(err, errlen, HCCL_E_PARA, "device list is empty; a job needs at least 1 device");
  char list[HCCL_TOPO_MAX_DEVICES * 4 + 16];
  if (n > HCCL_TOPO_MAX_DEVICES * 2) {
    return fail(err, errlen, HCCL_E_PARA,
                "device list has %d devices; topology %s has %d, and a server at most %d", n,
                t->name, t->ndevices, HCCL_TOPO_MAX_DEVICES);
  }
  format_list(devices, n, list, sizeof(list));

  for (int i = 0; i < n; i++)
    if (devices[i] < 0 || devices[i] >= t->ndevices)
      return fail(err, errlen, HCCL_E_PARA,
                  "device %d in device list '%s' is out of range; topology %s has devices 0-%d",
                  devices[i], list, t->name, t->ndevices - 1);
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (devices[i] == devices[j])
        return fail(err, errlen, HCCL_E_PARA,
                    "device %d appears twice in device list '%s'; each device drives one rank",
                    devices[i], list);
  if (!hccl__topo_count_ok(t, n)) {
    char rule[256];
    hccl__topo_count_rule(t, rule, sizeof(rule));
    return fail(err, errlen, HCCL_E_PARA, "device list '%s' has %d devices; %s", list, n, rule);
  }

  if (t->partial_jobs_within_group && (n == 2 || n == 4)) {
    bool seen[HCCL_TOPO_MAX_GROUPS] = {false};
    int nseen = 0;
    for (int i = 0; i < n; i++) {
      int g = t->group_of[devices[i]];
      if (g >= 0 && g < HCCL_TOPO_MAX_GROUPS && !seen[g]) {
        seen[g] = true;
        nseen++;
      }
    }
    if (nseen > 1) {
      /* "groups 0-3 and 4-7", or "groups 0-1, 2-3 and 4-5" when more are spanned. */
      char groups[512];
      size_t used = 0;
      int k = 0;
      groups[0] = '\0';
      for (int g = 0; g < HCCL_TOPO_MAX_GROUPS; g++) {
        if (!seen[g]) continue;
        char members[128];
        format_group(t, g, members, sizeof(members));
        const char *sep = k == 0 ? "" : (k == nseen - 1 ? " and " : ", ");
        int w = snprintf(groups + used, sizeof(groups) - used, "%s%s", sep, members);
        if (w < 0 || (size_t)w >= sizeof(groups) - used) break;
        used += (size_t)w;
        k++;
      }
      return fail(err, errlen, HCCL_E_PARA,
                  "device list %s spans groups %s of topology %s; a 2- or 4-device job must sit "
                  "inside one group (a flat topology has no groups: " TOPO_CHOOSE_FLAT ")",
                  list, groups, t->name);
    }
  }
  return HCCL_SUCCESS;
}

/*
 * The ring over an Ascend 910 server's 8 devices. Inside a group every device reaches every
 * other over HCCS, so any order is fine there; between the groups there is only PCIe. Walking
 * each group in id order and then the next group crosses PCIe twice (once each way), the
 * fewest a ring spanning two groups can:
 *
 *        group 0 (HCCS full mesh)          group 1 (HCCS full mesh)
 *     +--> 0 --> 1 --> 2 --> 3 ---PCIe---> 4 --> 5 --> 6 --> 7 --+
 *     |                                                          |
 *     +---------------------------PCIe---------------------------+
 *
 * With k groups in the job the ring crosses k times (0 when the job sits in one group).
 */
void hccl__topo_ring(const struct hccl_topo *t, const int *devices, int n, int *order) {
  if (!devices || !order || n <= 0) return;
  int unknown_group = t ? t->ngroups : 0;
  /* Sort key per entry: (group, device id, input index); unknown devices after all groups. */
  for (int i = 0; i < n; i++)
    order[i] = i;
  for (int i = 1; i < n; i++) {
    for (int j = i; j > 0; j--) {
      int a = order[j - 1], b = order[j];
      int da = devices[a], db = devices[b];
      int ga = (t && da >= 0 && da < t->ndevices) ? t->group_of[da] : unknown_group;
      int gb = (t && db >= 0 && db < t->ndevices) ? t->group_of[db] : unknown_group;
      bool after = ga > gb || (ga == gb && (da > db || (da == db && a > b)));
      if (!after) break;
      order[j - 1] = b;
      order[j] = a;
    }
  }
}
