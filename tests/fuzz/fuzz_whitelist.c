/*
 * fuzz_whitelist.c - libFuzzer target: hccl__whitelist_parse (bootstrap/trust.c), the parser
 * behind HCCL_WHITELIST_FILE, on the input as the file's text.
 *
 * Beyond "no crash": a whitelist that parses lets in every address its host_ip lists (read
 * back from the same text with cJSON, as IPv4, as IPv6 and, for IPv4, as the IPv4-mapped IPv6
 * address a dual-stack listener sees), turns away what is not IPv4 or IPv6, and keeps the
 * file name for messages. One that does not parse returns HCCL_E_PARA with a message naming
 * the file and the field at fault (or saying the text is not JSON), and sets no whitelist.
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <sys/un.h>

#include "fuzz.h"
#include "trust.h"

#define FILE_NAME "fuzz-whitelist.json"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  fuzz_quiet_logs();
  return 0;
}

/* Every host_ip entry of text is let in, whichever way it arrives. */
static void check_lets_in_listed(const struct hccl_whitelist *wl, const char *text) {
  cJSON *root = cJSON_Parse(text);
  FUZZ_CHECK(root, "the whitelist parsed, cJSON does not");
  const cJSON *item;
  cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(root, "host_ip")) {
    const char *s = cJSON_GetStringValue(item);
    FUZZ_CHECK(s, "a host_ip entry that is not a string was accepted");
    struct sockaddr_in a4 = {.sin_family = AF_INET};
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6};
    if (inet_pton(AF_INET, s, &a4.sin_addr) == 1) {
      FUZZ_CHECK(hccl__whitelist_allows(wl, (struct sockaddr *)&a4), "%s turned away", s);
      unsigned char *b = a6.sin6_addr.s6_addr;
      b[10] = b[11] = 0xff;
      memcpy(b + 12, &a4.sin_addr, 4);
      FUZZ_CHECK(hccl__whitelist_allows(wl, (struct sockaddr *)&a6), "::ffff:%s turned away", s);
    } else {
      FUZZ_CHECK(inet_pton(AF_INET6, s, &a6.sin6_addr) == 1, "'%s' accepted as an address", s);
      FUZZ_CHECK(hccl__whitelist_allows(wl, (struct sockaddr *)&a6), "%s turned away", s);
    }
  }
  cJSON_Delete(root);
  struct sockaddr_un un = {.sun_family = AF_UNIX};
  FUZZ_CHECK(!hccl__whitelist_allows(wl, (struct sockaddr *)&un), "an AF_UNIX peer let in");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const char *const fields[] = {"host_ip", "unknown field", "top level", "JSON", NULL};
  char *text = fuzz_text(data, size);
  struct hccl_whitelist *wl = (struct hccl_whitelist *)0x1;
  hccl__set_last_error("");
  HcclResult r = hccl__whitelist_parse(text, FILE_NAME, &wl);
  const char *msg = HcclGetLastErrorMessage();
  if (r == HCCL_SUCCESS) {
    FUZZ_CHECK(strcmp(hccl__whitelist_file(wl), FILE_NAME) == 0, "file '%s'",
               hccl__whitelist_file(wl));
    check_lets_in_listed(wl, text);
    hccl__whitelist_free(wl);
  } else {
    FUZZ_CHECK(r == HCCL_E_PARA, "result %d (%s)", r, msg);
    FUZZ_CHECK(strstr(msg, "whitelist " FILE_NAME) == msg, "message '%s'", msg);
    FUZZ_CHECK(fuzz_has_any(msg, fields), "message '%s' names no field", msg);
    FUZZ_CHECK(wl == (struct hccl_whitelist *)0x1, "out set by a failed parse");
  }
  free(text);
  return 0;
}
