/*
 * fuzz_ranktable.c - libFuzzer target: hccl__ranktable_parse (bootstrap/ranktable.c) on the
 * input as the text of RANK_TABLE_FILE.
 *
 * Beyond "no crash": a table that parses has nservers x per_server ranks (per_server 1 to
 * 64; at most 65536 ranks), every (server, index on it) place taken by exactly one rank,
 * devices 0-1023 and distinct on a server, one non-empty server_id per server and different
 * ones on different servers (what HcclCommInitClusterInfo meets its peers by). A table that
 * does not parse returns HCCL_E_PARA with a message that names the file and the field at
 * fault (or says the text is not JSON), and sets no table.
 */
#include <stdbool.h>

#include "fuzz.h"
#include "ranktable.h"

#define FILE_NAME "fuzz-ranktable.json"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fuzz_quiet_logs();
  return 0;
}

static void check_table(const struct hccl_ranktable *t) {
  uint32_t per = t->per_server;
  FUZZ_CHECK(per >= 1 && per <= 64, "per_server %u", per);
  FUZZ_CHECK(t->nservers >= 1 && t->nranks == t->nservers * per && t->nranks <= 65536,
             "%u ranks on %u servers of %u", t->nranks, t->nservers, per);
  /* Which rank holds each place; a server's first rank gives its server_id. */
  uint32_t *place = malloc(sizeof(*place) * t->nranks);
  uint32_t *first = malloc(sizeof(*first) * t->nservers);
  FUZZ_CHECK(place && first, "out of memory");
  memset(place, 0xff, sizeof(*place) * t->nranks);
  memset(first, 0xff, sizeof(*first) * t->nservers);
  for (uint32_t r = 0; r < t->nranks; r++) {
    const struct hccl_ranktable_rank *k = &t->rank[r];
    FUZZ_CHECK(k->server < t->nservers && k->local_rank < per, "rank %u at %u/%u", r, k->server,
               k->local_rank);
    FUZZ_CHECK(k->device >= 0 && k->device <= 1023, "rank %u device %d", r, k->device);
    size_t sid = strnlen(k->server_id, sizeof(k->server_id));
    FUZZ_CHECK(sid > 0 && sid < sizeof(k->server_id), "rank %u server_id of %zu bytes", r, sid);
    uint32_t *p = &place[k->server * per + k->local_rank];
    FUZZ_CHECK(*p == UINT32_MAX, "ranks %u and %u both at server %u index %u", *p, r, k->server,
               k->local_rank);
    *p = r;
    if (first[k->server] == UINT32_MAX) first[k->server] = r;
    const struct hccl_ranktable_rank *f = &t->rank[first[k->server]];
    FUZZ_CHECK(strcmp(f->server_id, k->server_id) == 0, "server %u has two ids", k->server);
  }
  for (uint32_t s = 0; s < t->nservers; s++)
    for (uint32_t i = 0; i < per; i++)
      for (uint32_t j = 0; j < i; j++)
        FUZZ_CHECK(t->rank[place[s * per + i]].device != t->rank[place[s * per + j]].device,
                   "server %u has device %d twice", s, t->rank[place[s * per + i]].device);
  /* Servers apart by their ids (compared on a bounded number of servers to stay fast). */
  uint32_t ns = t->nservers < 256 ? t->nservers : 256;
  for (uint32_t a = 0; a < ns; a++)
    for (uint32_t b = 0; b < a; b++)
      FUZZ_CHECK(strcmp(t->rank[first[a]].server_id, t->rank[first[b]].server_id) != 0,
                 "servers %u and %u share server_id \"%s\"", a, b, t->rank[first[a]].server_id);
  free(place);
  free(first);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const fields[] = {"version",   "status", "server_list", "server_count",
                                       "ranks",     "device", "rank_id",     "server_id",
                                       "top level", "JSON",   NULL};
  char *text = fuzz_text(data, size);
  struct hccl_ranktable *t = (struct hccl_ranktable *)0x1;
  hccl__set_last_error("");
  HcclResult r = hccl__ranktable_parse(text, FILE_NAME, &t);
  const char *msg = HcclGetLastErrorMessage();
  if (r == HCCL_SUCCESS) {
    check_table(t);
    free(t);
  } else {
    FUZZ_CHECK(r == HCCL_E_PARA, "result %d (%s)", r, msg);
    FUZZ_CHECK(strstr(msg, "rank table " FILE_NAME ": ") == msg, "message '%s'", msg);
    FUZZ_CHECK(fuzz_has_any(msg + strlen("rank table " FILE_NAME ": "), fields),
               "message '%s' names no field", msg);
    FUZZ_CHECK(t == (struct hccl_ranktable *)0x1, "out set by a failed parse");
  }
  free(text);
  return 0;
}
