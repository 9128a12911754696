/*
 * fuzz_topo.c - libFuzzer target: hccl__topo_parse (topo/topo.c) on the input as JSON text.
 *
 * Beyond "no crash": a parse that succeeds gives a topology within topo.h's ranges (1 to
 * HCCL_TOPO_MAX_DEVICES devices, 1 to HCCL_TOPO_MAX_GROUPS groups, every device in exactly
 * one existing group, no empty group, a non-empty name); one that fails returns HCCL_E_PARA,
 * writes a message that starts with "topology" and names the field, group or device at
 * fault (or says the text is not JSON), and leaves *out untouched. A parsed topology then
 * judges a device list made of the input's last bytes: hccl__topo_check_devices accepts it
 * only if it keeps topo.h's rules (any count on a flat topology, only those of device_counts
 * where the topology names them), and hccl__topo_ring orders any list as a permutation that
 * walks the groups in order.
 */
#include <stdbool.h>

#include "fuzz.h"
#include "topo.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fuzz_quiet_logs();
  return 0;
}

static void check_topology(const struct hccl_topo *t) {
  FUZZ_CHECK(t->ndevices >= 1 && t->ndevices <= HCCL_TOPO_MAX_DEVICES, "devices %d", t->ndevices);
  FUZZ_CHECK(t->ngroups >= 1 && t->ngroups <= HCCL_TOPO_MAX_GROUPS, "groups %d", t->ngroups);
  size_t name_len = strnlen(t->name, sizeof(t->name));
  FUZZ_CHECK(name_len > 0 && name_len < sizeof(t->name), "name of %zu bytes", name_len);
  int members[HCCL_TOPO_MAX_GROUPS] = {0};
  for (int d = 0; d < t->ndevices; d++) {
    int g = t->group_of[d];
    FUZZ_CHECK(g >= 0 && g < t->ngroups, "device %d in group %d of %d", d, g, t->ngroups);
    members[g]++;
  }
  for (int g = 0; g < t->ngroups; g++)
    FUZZ_CHECK(members[g] > 0, "group %d of %d is empty", g, t->ngroups);
}

/* The devices rule of topo.h, written out again: what check_devices must agree with. */
static bool devices_ok(const struct hccl_topo *t, const int *dev, int n) {
  /* device_counts: 0 = any count (a flat server); else bit k-1 allows k devices. */
  if (n < 1 || (t->counts != 0 && (n > 64 || !(t->counts >> (n - 1) & 1)))) return false;
  for (int i = 0; i < n; i++) {
    if (dev[i] < 0 || dev[i] >= t->ndevices) return false;
    for (int j = 0; j < i; j++)
      if (dev[i] == dev[j]) return false;
  }
  if (t->partial_jobs_within_group && (n == 2 || n == 4))
    for (int i = 1; i < n; i++)
      if (t->group_of[dev[i]] != t->group_of[dev[0]]) return false;
  return true;
}

static void check_devices_and_ring(const struct hccl_topo *t, const uint8_t *data, size_t size) {
  int dev[16], order[16], n = size ? data[size - 1] % 10 : 0;
  if ((size_t)n + 1 > size) n = (int)size - 1;
  if (n <= 0) return;
  for (int i = 0; i < n; i++)
    dev[i] = (int)data[size - 2 - i] - 8; /* a few negative and out-of-range ids too */
  char err[512] = "";
  HcclResult r = hccl__topo_check_devices(t, dev, n, err, sizeof(err));
  bool want = devices_ok(t, dev, n);
  FUZZ_CHECK((r == HCCL_SUCCESS) == want, "check_devices said %d, the rule says %s (%s)", r,
             want ? "yes" : "no", err);
  if (r != HCCL_SUCCESS) FUZZ_CHECK(strstr(err, "device") != NULL, "message '%s'", err);

  hccl__topo_ring(t, dev, n, order);
  bool seen[16] = {false};
  int last_group = -1;
  for (int i = 0; i < n; i++) {
    FUZZ_CHECK(order[i] >= 0 && order[i] < n && !seen[order[i]], "ring is not a permutation");
    seen[order[i]] = true;
    int d = dev[order[i]];
    int g = d >= 0 && d < t->ndevices ? t->group_of[d] : t->ngroups;
    FUZZ_CHECK(g >= last_group, "ring goes back from group %d to %d", last_group, g);
    last_group = g;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const about[] = {"field", "group", "device", "JSON", NULL};
  char *text = fuzz_text(data, size);
  struct hccl_topo t, untouched;
  memset(&t, 0xa5, sizeof(t));
  untouched = t;
  char err[512] = "";
  HcclResult r = hccl__topo_parse(text, &t, err, sizeof(err));
  if (r == HCCL_SUCCESS) {
    check_topology(&t);
    check_devices_and_ring(&t, data, size);
  } else {
    FUZZ_CHECK(r == HCCL_E_PARA, "result %d", r);
    FUZZ_CHECK(strncmp(err, "topology", 8) == 0, "message '%s' does not start with topology", err);
    FUZZ_CHECK(fuzz_has_any(err, about), "message '%s' names no field", err);
    FUZZ_CHECK(memcmp(&t, &untouched, sizeof(t)) == 0, "out written by a failed parse");
  }
  free(text);
  return 0;
}
