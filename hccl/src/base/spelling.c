/*
 * spelling.c - the edit distance behind "did you mean" (see spelling.h).
 */
#include "spelling.h"

#include <ctype.h>

static int same(char x, char y) {
  return toupper((unsigned char)x) == toupper((unsigned char)y);
}

int hccl__edit_distance(const char *a, size_t n, const char *b, size_t m) {
  if (n > 63 || m > 63) return HCCL_SPELLING_FAR;
  int d[64][64];
  for (size_t i = 0; i <= n; i++)
    d[i][0] = (int)i;
  for (size_t j = 0; j <= m; j++)
    d[0][j] = (int)j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      int best = d[i - 1][j - 1] + !same(a[i - 1], b[j - 1]);
      if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && same(a[i - 1], b[j - 2]) && same(a[i - 2], b[j - 1]) &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[n][m];
}
