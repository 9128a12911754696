/*
 * cpubind.c - which CPUs each rank runs on (--cpu-bind) and what OMP_NUM_THREADS it gets.
 *
 * The CPUs considered are the launcher's own affinity (sched_getaffinity), so a launcher run
 * under taskset or a container's cpuset divides what it was given, not the whole machine.
 *   block (default): the Ascend docs' recipe. With m CPUs and n ranks, k = m / n CPUs each and
 *     rank r gets the r-th contiguous block (as `taskset -c r*k-(r+1)*k-1`); the m % n left
 *     over stay unused. With fewer CPUs than ranks, rank r gets CPU r mod m (said once).
 *   none: ranks inherit the launcher's affinity.
 *   a list: one entry per rank, separated by commas; an entry is CPUs and ranges joined by '+'
 *     (0,1 or 0-3,4-7 or 0+2,1+3). Fewer entries than ranks are reused round-robin (said once).
 * The binding itself is applied in the child, before exec (supervise.c).
 */
#include "launch.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void launch_format_cpus(const cpu_set_t *set, char *buf, size_t len) {
  size_t used = 0;
  bool first = true;
  buf[0] = '\0';
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, set)) continue;
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set))
      e++;
    int w = e > c ? snprintf(buf + used, len - used, "%s%d-%d", first ? "" : ",", c, e)
                  : snprintf(buf + used, len - used, "%s%d", first ? "" : ",", c);
    if (w < 0 || (size_t)w >= len - used) return;
    used += (size_t)w;
    first = false;
    c = e;
  }
}

/* Parses one --cpu-bind entry ("3", "0-3", "0+2", "0-1+4-5") of length len into set. */
static int parse_cpu_entry(const char *entry, size_t len, const cpu_set_t *allowed,
                           const char *list, cpu_set_t *set, char *err, size_t errlen) {
  char allowed_s[256];
  launch_format_cpus(allowed, allowed_s, sizeof(allowed_s));
  CPU_ZERO(set);
  const char *p = entry, *end = entry + len;
  while (p < end) {
    long lo = -1, hi;
    char *after;
    if (isdigit((unsigned char)*p)) {
      lo = strtol(p, &after, 10);
      p = after;
    }
    hi = lo;
    if (lo >= 0 && p < end && *p == '-') {
      p++;
      hi = -1;
      if (isdigit((unsigned char)*p)) {
        hi = strtol(p, &after, 10);
        p = after;
      }
    }
    if (lo < 0 || hi < 0 || (p < end && *p != '+')) {
      snprintf(err, errlen,
               "--cpu-bind '%s' has the entry '%.*s', which is not CPUs; give block, none, or "
               "one entry per rank separated by commas, each CPUs or ranges joined by '+' (e.g. "
               "0-3,4-7)",
               list, (int)len, entry);
      return -1;
    }
    if (hi < lo) {
      snprintf(err, errlen, "--cpu-bind '%s' has the range %ld-%ld, which runs backwards", list, lo,
               hi);
      return -1;
    }
    for (long c = lo; c <= hi; c++) {
      if (c >= CPU_SETSIZE || !CPU_ISSET((int)c, allowed)) {
        snprintf(err, errlen,
                 "--cpu-bind '%s' names CPU %ld, which npu-launch may not use; its CPUs are %s",
                 list, c, allowed_s);
        return -1;
      }
      CPU_SET((int)c, set);
    }
    if (p < end) p++; /* '+' */
  }
  return 0;
}

static int plan_list(struct launch_job *j, const cpu_set_t *allowed, char *err, size_t errlen) {
  const char *list = j->o.cpu_bind_list;
  cpu_set_t sets[LAUNCH_MAX_LOCAL];
  int nsets = 0;
  const char *p = list;
  for (;;) {
    size_t len = strcspn(p, ",");
    if (len == 0) {
      snprintf(err, errlen,
               "--cpu-bind '%s' has an empty entry; give one entry of CPUs per rank, separated "
               "by commas",
               list);
      return -1;
    }
    if (nsets == j->nlocal) {
      snprintf(err, errlen,
               "--cpu-bind '%s' has more entries than the %d rank%s on this server; give one "
               "entry per rank",
               list, j->nlocal, j->nlocal == 1 ? "" : "s");
      return -1;
    }
    if (parse_cpu_entry(p, len, allowed, list, &sets[nsets], err, errlen)) return -1;
    nsets++;
    p += len;
    if (*p == '\0') break;
    p++;
  }
  if (nsets < j->nlocal)
    launch_note("--cpu-bind '%s' has %d entr%s for %d ranks; they are reused round-robin (rank r "
                "on entry r mod %d)",
                list, nsets, nsets == 1 ? "y" : "ies", j->nlocal, nsets);
  for (int i = 0; i < j->nlocal; i++) {
    j->ranks[i].cpus = sets[i % nsets];
    j->ranks[i].bound = true;
    j->ranks[i].ncpus = CPU_COUNT(&j->ranks[i].cpus);
  }
  return 0;
}

int launch_plan_binding(struct launch_job *j, char *err, size_t errlen) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0 || CPU_COUNT(&allowed) == 0)
    CPU_SET(0, &allowed); /* cannot happen on Linux; keep a sane plan anyway */
  int cpus[CPU_SETSIZE], m = 0;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &allowed)) cpus[m++] = c;
  int n = j->nlocal;

  switch (j->o.cpu_bind) {
  case LAUNCH_BIND_NONE:
    for (int i = 0; i < n; i++) {
      j->ranks[i].bound = false;
      j->ranks[i].cpus = allowed;
      j->ranks[i].ncpus = m / n > 0 ? m / n : 1; /* its fair share, for OMP_NUM_THREADS */
    }
    break;
  case LAUNCH_BIND_LIST:
    if (plan_list(j, &allowed, err, errlen)) return -1;
    break;
  case LAUNCH_BIND_BLOCK:
    if (m < n)
      launch_note("%d ranks share %d CPU%s round-robin (rank r on CPU number r mod %d of this "
                  "server's list)",
                  n, m, m == 1 ? "" : "s", m);
    for (int i = 0; i < n; i++) {
      struct launch_rank *r = &j->ranks[i];
      CPU_ZERO(&r->cpus);
      if (m < n) {
        CPU_SET(cpus[i % m], &r->cpus);
      } else {
        int k = m / n;
        for (int c = i * k; c < (i + 1) * k; c++)
          CPU_SET(cpus[c], &r->cpus);
      }
      r->bound = true;
      r->ncpus = CPU_COUNT(&r->cpus);
    }
    break;
  }

  const char *omp = getenv("OMP_NUM_THREADS");
  j->set_omp = !omp || !*omp;
  if (j->set_omp && !j->o.dry_run) {
    int lo = j->ranks[0].ncpus, hi = lo;
    for (int i = 1; i < n; i++) {
      if (j->ranks[i].ncpus < lo) lo = j->ranks[i].ncpus;
      if (j->ranks[i].ncpus > hi) hi = j->ranks[i].ncpus;
    }
    char counts[32];
    snprintf(counts, sizeof(counts), lo == hi ? "%d" : "%d-%d", lo, hi);
    launch_note("OMP_NUM_THREADS is not set; each rank gets its CPU count (%s), so threads do not "
                "oversubscribe its CPUs; set it yourself to choose",
                counts);
  }
  return 0;
}

void launch_report_bindings(const struct launch_job *j) {
  for (int i = 0; i < j->nlocal; i++) {
    const struct launch_rank *r = &j->ranks[i];
    char cpus[256];
    launch_format_cpus(&r->cpus, cpus, sizeof(cpus));
    if (r->bound)
      launch_note("rank %d (device %d) bound to CPUs %s", r->rank, r->device, cpus);
    else
      launch_note("rank %d (device %d) not bound (--cpu-bind none); may run on CPUs %s", r->rank,
                  r->device, cpus);
  }
}
