/*
 * devices.c - from the device list to ranks: parsing --device-list (numbers and ranges),
 * choosing the server topology and applying HCCL's device rules through the topo module,
 * numbering ranks server by server, the variables each rank gets, and the dry-run listing.
 *
 * The mapping is the Ascend docs' own: the list is sorted and rank i of this server drives
 * device sorted[i]; the global rank is first + i, first being the sum of the device counts of
 * the servers before this one (ranks.c; node_rank * n when every server has n). Until the
 * launchers have met (servers.c) every server is taken to have this one's count: that is what
 * a dry run across servers shows, and says.
 */
#include "launch.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Devices a --device-list may hold before its count alone refuses it. */
#define DEVICE_LIST_MAX (HCCL_TOPO_MAX_DEVICES * 2)

static const char *skip_space(const char *p) {
  while (*p == ' ' || *p == '\t')
    p++;
  return p;
}

/* Parses a non-negative decimal number at *p; advances *p. -1 when there is none. */
static long parse_number(const char **p) {
  const char *s = *p;
  long v = 0;
  if (!isdigit((unsigned char)*s)) return -1;
  while (isdigit((unsigned char)*s)) {
    if (v < 1000000) v = v * 10 + (*s - '0');
    s++;
  }
  *p = s;
  return v;
}

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int launch_parse_device_list(const char *list, int *devices, int max, int *n, char *err,
                             size_t errlen) {
  const char *p = skip_space(list);
  int count = 0;
  static const char hint[] = "entries are device numbers or ranges such as 0-3, separated by "
                             "commas";
  if (*p == '\0') {
    snprintf(err, errlen,
             "device list '%s' is empty; give the devices to use, e.g. --device-list 0,1,2,3 or "
             "0-3",
             list);
    return -1;
  }
  for (;;) {
    p = skip_space(p);
    const char *entry = p;
    size_t entry_len = strcspn(entry, ",");
    while (entry_len > 0 && (entry[entry_len - 1] == ' ' || entry[entry_len - 1] == '\t'))
      entry_len--;
    if (entry_len == 0) {
      snprintf(err, errlen, "device list '%s' has an empty entry; %s", list, hint);
      return -1;
    }
    if (*p == '-' && isdigit((unsigned char)p[1])) {
      snprintf(err, errlen, "device list '%s' has device -%.*s; device numbers are 0 or more", list,
               (int)(entry_len - 1), entry + 1);
      return -1;
    }
    long lo = parse_number(&p), hi = lo;
    if (lo >= 0 && *p == '-') {
      p++;
      if (*p == '-' && isdigit((unsigned char)p[1])) {
        snprintf(err, errlen,
                 "device list '%s' has the range '%.*s' ending in a negative "
                 "number; device numbers are 0 or more",
                 list, (int)entry_len, entry);
        return -1;
      }
      hi = parse_number(&p);
    }
    p = skip_space(p);
    if (lo < 0 || hi < 0 || (*p != ',' && *p != '\0')) {
      snprintf(err, errlen,
               "device list '%s' has '%.*s', which is not a device number or range; %s", list,
               (int)entry_len, entry, hint);
      return -1;
    }
    if (hi < lo) {
      snprintf(err, errlen,
               "device list '%s' has the range %ld-%ld, which runs backwards; write "
               "%ld-%ld",
               list, lo, hi, hi, lo);
      return -1;
    }
    for (long d = lo; d <= hi; d++) {
      if (count >= max) { /* refused below by its count; just count the rest */
        count += (int)(hi - d + 1);
        break;
      }
      for (int i = 0; i < count; i++)
        if (devices[i] == d) {
          snprintf(err, errlen,
                   "device list '%s' names device %ld twice; each device drives one "
                   "rank",
                   list, d);
          return -1;
        }
      devices[count++] = (int)d;
    }
    if (*p == '\0') break;
    p++; /* ',' */
  }
  if (count > max) {
    snprintf(err, errlen, "device list '%s' has %d devices; a server has at most %d", list, count,
             HCCL_TOPO_MAX_DEVICES);
    return -1;
  }
  qsort(devices, (size_t)count, sizeof(int), cmp_int);
  *n = count;
  return 0;
}

int launch_plan_devices(struct launch_job *j, char *err, size_t errlen) {
  const struct launch_opts *o = &j->o;
  char terr[512];
  if (o->topology) {
    if (hccl__topo_load(o->topology, NULL, &j->topo, terr, sizeof(terr)) != HCCL_SUCCESS) {
      snprintf(err, errlen, "%s%s",
               o->topology_from_option ? "--topology: " : "HCCL_TOPO_FILE: ", terr);
      return -1;
    }
  }

  int devices[DEVICE_LIST_MAX], n = 0;
  if (o->device_list) {
    if (launch_parse_device_list(o->device_list, devices, DEVICE_LIST_MAX, &n, err, errlen))
      return -1;
    if (o->nproc_per_node && o->nproc_per_node != n) {
      snprintf(err, errlen,
               "--nproc-per-node %d disagrees with --device-list '%s', which has %d "
               "devices; give one of the two",
               o->nproc_per_node, o->device_list, n);
      return -1;
    }
  } else {
    n = o->nproc_per_node;
    if (n > HCCL_TOPO_MAX_DEVICES) {
      snprintf(err, errlen, "--nproc-per-node %d: a server has at most %d devices", n,
               HCCL_TOPO_MAX_DEVICES);
      return -1;
    }
    for (int i = 0; i < n; i++)
      devices[i] = i;
  }

  if (!o->topology) { /* flat8, widened to the largest device as libhccl does (place.c) */
    int top = 7;
    for (int i = 0; i < n; i++)
      if (devices[i] > top) top = devices[i];
    hccl__topo_flat(top + 1, &j->topo); /* at most HCCL_TOPO_MAX_DEVICES; checked below */
  }
  if (hccl__topo_check_devices(&j->topo, devices, n, terr, sizeof(terr)) != HCCL_SUCCESS) {
    if (!o->topology && strstr(terr, "out of range"))
      snprintf(err, errlen, "%s (the default flat server grows to the largest device id, up to "
               "%d devices)", terr, HCCL_TOPO_MAX_DEVICES);
    else
      snprintf(err, errlen, "%s", terr);
    return -1;
  }
  if (n > LAUNCH_MAX_LOCAL) { /* cannot happen after the check; keeps the arrays safe */
    snprintf(err, errlen, "%d devices on one server; at most %d", n, LAUNCH_MAX_LOCAL);
    return -1;
  }
  j->nlocal = n;
  for (int i = 0; i < n; i++) {
    j->ranks[i].local_rank = i;
    j->ranks[i].device = devices[i];
  }
  launch_place_ranks(j, o->node_rank * n, o->nnodes * n); /* until the servers meet */
  return 0;
}

void launch_place_ranks(struct launch_job *j, int first, int world) {
  j->first = first;
  j->world = world;
  for (int i = 0; i < j->nlocal; i++)
    j->ranks[i].rank = first + i;
}

static void set_var(struct launch_var *v, const char *name, const char *fmt, long value) {
  v->name = name;
  snprintf(v->value, sizeof(v->value), fmt, value);
}

int launch_rank_vars(const struct launch_job *j, int local_rank, struct launch_var *vars) {
  const struct launch_rank *r = &j->ranks[local_rank];
  int n = 0;
  set_var(&vars[n++], "RANK", "%ld", r->rank);
  set_var(&vars[n++], "LOCAL_RANK", "%ld", r->local_rank);
  set_var(&vars[n++], "WORLD_SIZE", "%ld", j->world);
  set_var(&vars[n++], "LOCAL_WORLD_SIZE", "%ld", j->nlocal);
  set_var(&vars[n++], "GROUP_RANK", "%ld", j->o.node_rank);
  vars[n].name = "MASTER_ADDR";
  snprintf(vars[n++].value, LAUNCH_VALUE_MAX, "%s", j->master_addr);
  set_var(&vars[n++], "MASTER_PORT", "%ld", j->o.master_port);
  set_var(&vars[n++], "RANK_ID", "%ld", r->rank);
  set_var(&vars[n++], "RANK_SIZE", "%ld", j->world);
  set_var(&vars[n++], "DEVICE_ID", "%ld", r->device);
  set_var(&vars[n++], "ASCEND_DEVICE_ID", "%ld", r->device);
  if (j->set_omp) set_var(&vars[n++], "OMP_NUM_THREADS", "%ld", r->ncpus);
  if (j->job_token[0]) {
    vars[n].name = "HCCL_JOB_TOKEN";
    snprintf(vars[n++].value, LAUNCH_VALUE_MAX, "%s", j->job_token);
  }
  /* torchrun's names, which training scripts read to resume from their checkpoint. */
  set_var(&vars[n++], "TORCHELASTIC_RESTART_COUNT", "%ld", j->restart);
  set_var(&vars[n++], "TORCHELASTIC_MAX_RESTARTS", "%ld", j->o.max_restarts);
  set_var(&vars[n++], "NPU_LAUNCH_RESTART_COUNT", "%ld", j->restart);
  if (j->o.topology_from_option) { /* so that libhccl applies the same topology */
    vars[n].name = "HCCL_TOPO_FILE";
    snprintf(vars[n++].value, LAUNCH_VALUE_MAX, "%s", j->o.topology);
  }
  return n;
}

/* Writes s quoted for a POSIX shell when it needs quoting. */
static void print_shell_word(const char *s) {
  bool plain = *s != '\0';
  for (const char *p = s; *p && plain; p++)
    plain = isalnum((unsigned char)*p) || strchr("-_./=:,+@%", *p);
  if (plain) {
    fputs(s, stdout);
    return;
  }
  putchar('\'');
  for (const char *p = s; *p; p++) {
    if (*p == '\'')
      fputs("'\\''", stdout);
    else
      putchar(*p);
  }
  putchar('\'');
}

void launch_print_dry_run(const struct launch_job *j) {
  printf("npu-launch: dry run, nothing started: %d rank%s on this server (server %d of %d), "
         "world size %d, topology %s, master %s:%d\n",
         j->nlocal, j->nlocal == 1 ? "" : "s", j->o.node_rank, j->o.nnodes, j->world, j->topo.name,
         j->master_addr, j->o.master_port);
  if (j->o.nnodes > 1 && !j->met)
    printf("npu-launch: a dry run does not meet the other servers: it takes each to have %d "
           "device%s; servers with other counts move these ranks and the world size (each "
           "server's ranks follow those of the servers before it)\n",
           j->nlocal, j->nlocal == 1 ? "" : "s");
  for (int i = 0; i < j->nlocal; i++) {
    const struct launch_rank *r = &j->ranks[i];
    char cpus[256] = "not bound";
    if (r->bound) launch_format_cpus(&r->cpus, cpus, sizeof(cpus));
    printf("rank %d: device %d, local rank %d, cpus %s\n", r->rank, r->device, r->local_rank, cpus);
    struct launch_var vars[LAUNCH_MAX_VARS];
    int nv = launch_rank_vars(j, i, vars);
    fputs("  variables:", stdout);
    for (int v = 0; v < nv; v++) {
      printf(" %s=", vars[v].name);
      print_shell_word(vars[v].value);
    }
    fputs("\n  command: ", stdout);
    if (r->bound) printf("taskset -c %s ", cpus);
    for (char **a = j->o.argv; *a; a++) {
      print_shell_word(*a);
      if (a[1]) putchar(' ');
    }
    putchar('\n');
  }
  if (j->o.log_dir) printf("logs: %s/rank_N.log\n", j->o.log_dir);
  fflush(stdout);
}
