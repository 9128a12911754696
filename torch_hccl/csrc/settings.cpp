/*
 * settings.cpp - torch_hccl's settings (contract: settings.hpp; the table: docs/settings.md):
 * TORCH_HCCL_ALLOCATOR and TORCH_HCCL_ALLOCATOR_MIN_BYTES for the allocator (allocator.cpp),
 * TORCH_HCCL_SPLIT for new_group (torch_hccl/_split.py), and the "did you mean" warning for a
 * TORCH_HCCL_* name nothing reads, measured as libhccl's base/spelling.c measures HCCL_* names
 * (this is C++ over std::string for the module, which links only hccl.h of libhccl).
 */
#include "settings.hpp"

#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace torch_hccl {
namespace {

constexpr size_t kMaxMinBytes = size_t(1) << 40;
constexpr size_t kDefaultMinBytes = size_t(64) << 10; /* algo/plan.c's ZCOPY_MIN_BYTES */

/* "64K" -> 65536; false when v is not a whole number with an optional K, M or G suffix. */
bool parse_bytes(const char* v, size_t* out) {
  char* end;
  errno = 0;
  if (!*v || *v < '0' || *v > '9') return false;
  unsigned long long n = std::strtoull(v, &end, 10);
  if (errno) return false;
  int shift = 0;
  switch (*end) {
  case 'k':
  case 'K':
    shift = 10, end++;
    break;
  case 'm':
  case 'M':
    shift = 20, end++;
    break;
  case 'g':
  case 'G':
    shift = 30, end++;
    break;
  default:
    break;
  }
  if (*end || n > (kMaxMinBytes >> shift)) return false;
  *out = static_cast<size_t>(n) << shift;
  return true;
}

/* Every TORCH_HCCL_* variable something reads: the allocator's two, TORCH_HCCL_SPLIT
 * (read_split_setting), and the test suite's (ctest sets it for tests/torch). Any other name is a typo or a setting of another version, and is
 * ignored with a warning, as libhccl does for HCCL_* (hccl__settings_known). */
const char* const kKnownSettings[] = {"TORCH_HCCL_ALLOCATOR", "TORCH_HCCL_ALLOCATOR_MIN_BYTES",
                                      "TORCH_HCCL_SPLIT", "TORCH_HCCL_PYTHONPATH"};

/* Edit distance (insert, delete, substitute, swap two neighbours), letters compared without
 * case, as libhccl's settings.c measures it. */
size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); i++)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); j++)
    d[0][j] = j;
  auto up = [](char c) { return std::toupper(static_cast<unsigned char>(c)); };
  for (size_t i = 1; i <= a.size(); i++)
    for (size_t j = 1; j <= b.size(); j++) {
      size_t best = d[i - 1][j - 1] + (up(a[i - 1]) != up(b[j - 1]));
      best = std::min({best, d[i - 1][j] + 1, d[i][j - 1] + 1});
      if (i > 1 && j > 1 && up(a[i - 1]) == up(b[j - 2]) && up(a[i - 2]) == up(b[j - 1]))
        best = std::min(best, d[i - 2][j - 2] + 1);
      d[i][j] = best;
    }
  return d[a.size()][b.size()];
}

} // namespace

int warn_unknown_settings(char* const* env) {
  int warned = 0;
  const char* level = std::getenv("HCCL_LOG_LEVEL"); /* error (or 3) silences, as in libhccl */
  bool quiet = level && (strcasecmp(level, "error") == 0 || std::strcmp(level, "3") == 0);
  static const char kPrefix[] = "TORCH_HCCL_";
  for (; env && *env; env++) {
    if (std::strncmp(*env, kPrefix, sizeof(kPrefix) - 1) != 0) continue;
    std::string name(*env, std::strcspn(*env, "="));
    const char* near = nullptr;
    /* a typo: up to 1 edit in a name of up to 4 letters after the prefix, 2 up to 10, 3 beyond */
    size_t body = name.size() - (sizeof(kPrefix) - 1);
    size_t best = (body <= 4 ? 1 : body <= 10 ? 2 : 3) + 1;
    bool known = false;
    for (const char* k : kKnownSettings) {
      if (name == k) known = true;
      size_t dist = distance(name, k);
      if (dist < best) best = dist, near = k;
    }
    if (known) continue;
    warned++;
    if (quiet) continue;
    if (near)
      std::fprintf(stderr,
                   "torch_hccl pid %d WARN: %s is not a setting of torch_hccl (did you mean %s?); "
                   "it is ignored\n",
                   static_cast<int>(getpid()), name.c_str(), near);
    else
      std::fprintf(stderr,
                   "torch_hccl pid %d WARN: %s is not a setting of torch_hccl; it is ignored "
                   "(docs/settings.md lists the settings)\n",
                   static_cast<int>(getpid()), name.c_str());
  }
  return warned;
}

AllocatorSettings read_allocator_settings() {
  AllocatorSettings s{true, kDefaultMinBytes};
  const char* on = std::getenv("TORCH_HCCL_ALLOCATOR");
  if (on && *on) {
    if (std::strcmp(on, "0") != 0 && std::strcmp(on, "1") != 0)
      throw std::invalid_argument(std::string("TORCH_HCCL_ALLOCATOR=\"") + on +
                                  "\": it must be 0 (torch's own CPU allocator) or 1 (the "
                                  "shared-memory allocator, the default)");
    s.enabled = on[0] == '1';
  }
  const char* min = std::getenv("TORCH_HCCL_ALLOCATOR_MIN_BYTES");
  if (min && *min && !parse_bytes(min, &s.min_bytes))
    throw std::invalid_argument(std::string("TORCH_HCCL_ALLOCATOR_MIN_BYTES=\"") + min +
                                "\": it must be a whole number of bytes from 0 to 1099511627776 "
                                "(1T), optionally with a K, M or G suffix (64K = 65536)");
  return s;
}

bool read_split_setting() {
  const char* on = std::getenv("TORCH_HCCL_SPLIT");
  if (!on || !*on) return true;
  if (std::strcmp(on, "0") != 0 && std::strcmp(on, "1") != 0)
    throw std::invalid_argument(std::string("TORCH_HCCL_SPLIT=\"") + on +
                                "\": it must be 0 (every group over torch's store) or 1 "
                                "(new_group splits the default group's communicator, the "
                                "default)");
  return on[0] == '1';
}

} // namespace torch_hccl
