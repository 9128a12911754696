/*
 * mlp.c - the example's model: kernels, a small thread pool, layers, loss and data.
 *
 * The matrix products are written for the shapes of a data-parallel MLP, where the batch of
 * one rank is small (8 to 64 rows) and the weights are large (4 MiB per layer):
 *   forward      act[l+1] = act[l] . W          (batch x in) . (in x out)      kernel nn
 *   weight grad  gW = act[l]^T . dz             (in x batch) . (batch x out)   kernel nn, A read
 *                                                                              transposed
 *   input grad   dz' = dz . W^T                 (batch x out) . (in x out)^T   kernel nt
 * nn keeps a 4 x 16 tile of C in eight 8-float registers and walks k over A and a 16-wide
 * panel of B, both first packed contiguous (see nn_block for why); nt takes
 * dot products of contiguous rows, 4 rows of A against 2 rows of B at a time, so W is read
 * once. Vectors are GCC vector extensions; each kernel is compiled twice (target_clones: AVX2
 * + FMA, and the x86-64 baseline) and the loader picks the one the CPU runs, so the binary is
 * portable. Column blocks are shared out to the thread pool when there is more than one thread
 * (one rank on two cores); with one thread per rank everything runs on the calling thread.
 */
#include "mlp.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef float v8 __attribute__((vector_size(32), aligned(4)));

/* Not under TSan: the loader runs a clone's resolver before the sanitizer's runtime is up, and
 * the instrumented resolver crashes the program at start. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define KERNEL __attribute__((target_clones("fma", "default")))
#else
#define KERNEL
#endif

#define COL_BLOCK 128

/* ---- thread pool: run task(ctx, 0..ntasks-1) over the threads, caller included ---- */

typedef void (*task_fn)(void *ctx, int task);

static struct {
  int nthreads;
  pthread_t th[15];
  pthread_mutex_t mu;
  pthread_cond_t go, done;
  unsigned gen;
  int busy;
  task_fn fn;
  void *ctx;
  int ntasks;
  atomic_int next;
} g_pool = {.nthreads = 1,
            .mu = PTHREAD_MUTEX_INITIALIZER,
            .go = PTHREAD_COND_INITIALIZER,
            .done = PTHREAD_COND_INITIALIZER};

static void pool_drain(void) {
  for (int t; (t = atomic_fetch_add(&g_pool.next, 1)) < g_pool.ntasks;)
    g_pool.fn(g_pool.ctx, t);
}

static void *pool_worker(void *arg) {
  (void)arg;
  unsigned seen = 0;
  for (;;) {
    pthread_mutex_lock(&g_pool.mu);
    while (g_pool.gen == seen)
      pthread_cond_wait(&g_pool.go, &g_pool.mu);
    seen = g_pool.gen;
    pthread_mutex_unlock(&g_pool.mu);
    pool_drain();
    pthread_mutex_lock(&g_pool.mu);
    if (--g_pool.busy == 0) pthread_cond_signal(&g_pool.done);
    pthread_mutex_unlock(&g_pool.mu);
  }
  return NULL;
}

void mlp_set_threads(int n) {
  if (n < 1) n = 1;
  if (n > 16) n = 16;
  for (int t = 1; t < n; t++)
    pthread_create(&g_pool.th[t - 1], NULL, pool_worker, NULL);
  g_pool.nthreads = n;
}

static void (*g_progress)(void *);
static void *g_progress_ctx;

void mlp_set_progress(void (*fn)(void *ctx), void *ctx) {
  g_progress = fn;
  g_progress_ctx = ctx;
}

static void pool_run(int ntasks, task_fn fn, void *ctx) {
  if (g_pool.nthreads == 1 || ntasks == 1) {
    for (int t = 0; t < ntasks; t++) {
      fn(ctx, t);
      if (g_progress) g_progress(g_progress_ctx);
    }
    return;
  }
  pthread_mutex_lock(&g_pool.mu);
  g_pool.fn = fn;
  g_pool.ctx = ctx;
  g_pool.ntasks = ntasks;
  atomic_store(&g_pool.next, 0);
  g_pool.busy = g_pool.nthreads - 1;
  g_pool.gen++;
  pthread_cond_broadcast(&g_pool.go);
  pthread_mutex_unlock(&g_pool.mu);
  pool_drain();
  pthread_mutex_lock(&g_pool.mu);
  while (g_pool.busy > 0)
    pthread_cond_wait(&g_pool.done, &g_pool.mu);
  pthread_mutex_unlock(&g_pool.mu);
}

/* ---- kernels ---- */

/* C[i][j] = sum_k Ap(i,k) B[k][j] for j in [j0, j1). Ap is A packed by pack_a: tiles of 4
 * rows, k-major inside a tile (Ap[t*4K + 4k + r] = A(4t+r, k)), zero rows past M. Each 16-wide
 * panel of B is first copied into a contiguous K x 16 buffer: read in place, B's rows are a
 * whole row apart (4 KiB for 1024 columns), which makes every row of a panel fall into the same
 * cache set and the loop wait on L2 or memory. */
KERNEL static void nn_block(int M, int K, const float *Ap, const float *B, long ldb, float *C,
                            long ldc, int j0, int j1, float *panel) {
  for (int j = j0; j < j1; j += 16) {
    int w = j1 - j < 16 ? j1 - j : 16;
    for (int k = 0; k < K; k++) {
      const float *b = B + k * ldb + j;
      float *p = panel + 16 * k;
      if (w == 16) {
        *(v8 *)p = *(const v8 *)b;
        *(v8 *)(p + 8) = *(const v8 *)(b + 8);
      } else {
        for (int c = 0; c < 16; c++)
          p[c] = c < w ? b[c] : 0;
      }
    }
    for (int i = 0; i < M; i += 4) {
      const float *a = Ap + (long)i * K;
      v8 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
      for (int k = 0; k < K; k++) {
        v8 b0 = *(const v8 *)(panel + 16 * k), b1 = *(const v8 *)(panel + 16 * k + 8);
        const float *x = a + 4 * k;
        c00 += x[0] * b0;
        c01 += x[0] * b1;
        c10 += x[1] * b0;
        c11 += x[1] * b1;
        c20 += x[2] * b0;
        c21 += x[2] * b1;
        c30 += x[3] * b0;
        c31 += x[3] * b1;
      }
      v8 acc[4][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
      for (int r = 0; r < 4 && i + r < M; r++) {
        float *c = C + (i + r) * ldc + j;
        if (w == 16) {
          *(v8 *)c = acc[r][0];
          *(v8 *)(c + 8) = acc[r][1];
        } else {
          for (int q = 0; q < w; q++)
            c[q] = q < 8 ? acc[r][0][q] : acc[r][1][q - 8];
        }
      }
    }
  }
}

/* Ap (see nn_block) from A(i,k) = A[i*ai + k*ak]. */
static void pack_a(int M, int K, const float *A, long ai, long ak, float *Ap) {
  for (int i = 0; i < M; i += 4)
    for (int k = 0; k < K; k++)
      for (int r = 0; r < 4; r++)
        Ap[(long)i * K + 4 * k + r] = i + r < M ? A[(i + r) * ai + k * ak] : 0;
}

/* v by pointer, not by value: hsum is compiled for the baseline, where a 32-byte vector argument
 * is passed in memory, while its callers' AVX clones pass it in a ymm register; at -O0 (no
 * inlining) hsum read stack garbage. */
static inline float hsum(const v8 *v) {
  return (((*v)[0] + (*v)[4]) + ((*v)[1] + (*v)[5])) + (((*v)[2] + (*v)[6]) + ((*v)[3] + (*v)[7]));
}

/* C[i][j] = sum_k A[i][k] B[j][k] for j in [j0, j1). */
KERNEL static void nt_block(int M, int K, const float *A, long lda, const float *B, long ldb,
                            float *C, long ldc, int j0, int j1) {
  int K8 = K / 8 * 8;
  for (int j = j0; j < j1; j += 2) {
    int two = j + 1 < j1;
    const float *b0 = B + j * ldb, *b1 = two ? b0 + ldb : b0;
    for (int i = 0; i < M; i += 4) {
      int rows = M - i < 4 ? M - i : 4;
      const float *a[4];
      for (int r = 0; r < 4; r++)
        a[r] = A + (i + (r < rows ? r : 0)) * lda;
      v8 s00 = {0}, s01 = {0}, s10 = {0}, s11 = {0}, s20 = {0}, s21 = {0}, s30 = {0}, s31 = {0};
      for (int k = 0; k < K8; k += 8) {
        v8 w0 = *(const v8 *)(b0 + k), w1 = *(const v8 *)(b1 + k);
        v8 x0 = *(const v8 *)(a[0] + k), x1 = *(const v8 *)(a[1] + k);
        v8 x2 = *(const v8 *)(a[2] + k), x3 = *(const v8 *)(a[3] + k);
        s00 += x0 * w0;
        s01 += x0 * w1;
        s10 += x1 * w0;
        s11 += x1 * w1;
        s20 += x2 * w0;
        s21 += x2 * w1;
        s30 += x3 * w0;
        s31 += x3 * w1;
      }
      float out[4][2] = {{hsum(&s00), hsum(&s01)},
                         {hsum(&s10), hsum(&s11)},
                         {hsum(&s20), hsum(&s21)},
                         {hsum(&s30), hsum(&s31)}};
      for (int k = K8; k < K; k++)
        for (int r = 0; r < 4; r++) {
          out[r][0] += a[r][k] * b0[k];
          out[r][1] += a[r][k] * b1[k];
        }
      for (int r = 0; r < rows; r++) {
        C[(i + r) * ldc + j] = out[r][0];
        if (two) C[(i + r) * ldc + j + 1] = out[r][1];
      }
    }
  }
}

struct mm_job {
  int nt; /* 0: nn, 1: nt */
  int M, N, K;
  const float *A, *B;
  long ai, ak, ldb;
  float *C;
  long ldc;
  float *Ap; /* nn: A packed by pack_a */
};

/* Per-thread scratch that grows to the largest request. */
static float *scratch(float **buf, size_t *cap, size_t n) {
  if (n > *cap) {
    free(*buf);
    *buf = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    *cap = n;
  }
  return *buf;
}

static _Thread_local float *t_panel, *t_apack;
static _Thread_local size_t t_panel_cap, t_apack_cap;

static void mm_task(void *ctx, int t) {
  const struct mm_job *j = ctx;
  int j0 = t * COL_BLOCK, j1 = j0 + COL_BLOCK < j->N ? j0 + COL_BLOCK : j->N;
  if (j->nt) {
    nt_block(j->M, j->K, j->A, j->ai, j->B, j->ldb, j->C, j->ldc, j0, j1);
  } else {
    float *panel = scratch(&t_panel, &t_panel_cap, (size_t)j->K * 16);
    nn_block(j->M, j->K, j->Ap, j->B, j->ldb, j->C, j->ldc, j0, j1, panel);
  }
}

static void mm(struct mm_job *job) {
  if (!job->nt) {
    job->Ap = scratch(&t_apack, &t_apack_cap, (size_t)(job->M + 3) / 4 * 4 * job->K);
    pack_a(job->M, job->K, job->A, job->ai, job->ak, job->Ap);
  }
  pool_run((job->N + COL_BLOCK - 1) / COL_BLOCK, mm_task, job);
}

/* ---- deterministic numbers ---- */

static uint64_t mix(uint64_t x) { /* splitmix64's finaliser */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* A standard normal number that depends only on (seed, a, b). */
static float gauss(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t h = mix(seed ^ mix(a * 0x100000001b3ull ^ mix(b)));
  double u1 = ((h >> 11) + 1.0) / 9007199254740993.0, u2 = (mix(h) >> 11) / 9007199254740992.0;
  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ---- model ---- */

static float *falloc(uint64_t n) {
  float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
  if (p) memset(p, 0, n * sizeof(float));
  return p;
}

int mlp_create(mlp_t *m, int nlayers, const int *dims, int batch, uint64_t seed) {
  memset(m, 0, sizeof(*m));
  if (nlayers < 1 || nlayers > MLP_MAX_LAYERS) return -1;
  m->nlayers = nlayers;
  m->batch = batch;
  int maxd = 0;
  for (int l = 0; l <= nlayers; l++) {
    m->dims[l] = dims[l];
    if (dims[l] > maxd) maxd = dims[l];
  }
  for (int l = 0; l < nlayers; l++) {
    uint64_t in = (uint64_t)dims[l], out = (uint64_t)dims[l + 1];
    m->w[l] = falloc(in * out);
    m->b[l] = falloc(out);
    if (!m->w[l] || !m->b[l]) return -1;
    /* He normal for the ReLU layers; the output layer 10x smaller, so the first logits are
     * near zero and the loss starts near log(classes) */
    float sd = sqrtf(2.0f / (float)in) * (l + 1 == nlayers ? 0.1f : 1.0f);
    for (uint64_t k = 0; k < in * out; k++)
      m->w[l][k] = sd * gauss(seed, 1000 + l, k);
  }
  for (int l = 0; l <= nlayers; l++)
    if (!(m->act[l] = falloc((uint64_t)batch * dims[l]))) return -1;
  m->dz = falloc((uint64_t)batch * maxd);
  m->dz_next = falloc((uint64_t)batch * maxd);
  return m->dz && m->dz_next ? 0 : -1;
}

void mlp_free(mlp_t *m) {
  for (int l = 0; l < m->nlayers; l++) {
    free(m->w[l]);
    free(m->b[l]);
  }
  for (int l = 0; l <= m->nlayers; l++)
    free(m->act[l]);
  free(m->dz);
  free(m->dz_next);
}

uint64_t mlp_param_count(const mlp_t *m) {
  uint64_t n = 0;
  for (int l = 0; l < m->nlayers; l++)
    n += (uint64_t)m->dims[l] * m->dims[l + 1] + m->dims[l + 1];
  return n;
}

void mlp_make_batch(const mlp_t *m, uint64_t first_sample, int rows, uint64_t seed, float *x,
                    int *labels) {
  int in = m->dims[0], classes = m->dims[m->nlayers];
  for (int r = 0; r < rows; r++) {
    uint64_t s = first_sample + (uint64_t)r;
    int y = (int)(mix(seed ^ mix(s + 77)) % (uint64_t)classes);
    labels[r] = y;
    for (int f = 0; f < in; f++) /* centroid (fixed per class) + noise (per sample) */
      x[(uint64_t)r * in + f] = 0.5f * gauss(seed, 500 + y, f) + gauss(seed ^ 0x5a5a, s, f);
  }
}

void mlp_forward(mlp_t *m, const float *x, int rows) {
  memcpy(m->act[0], x, (size_t)rows * m->dims[0] * sizeof(float));
  for (int l = 0; l < m->nlayers; l++) {
    int in = m->dims[l], out = m->dims[l + 1];
    float *y = m->act[l + 1];
    struct mm_job job = {0, rows, out, in, m->act[l], m->w[l], in, 1, out, y, out, NULL};
    mm(&job);
    int relu = l + 1 < m->nlayers;
    for (int r = 0; r < rows; r++) {
      float *yr = y + (size_t)r * out;
      for (int j = 0; j < out; j++) {
        float v = yr[j] + m->b[l][j];
        yr[j] = relu && v < 0 ? 0 : v;
      }
    }
  }
}

double mlp_loss_backward(mlp_t *m, const int *labels, int rows) {
  int c = m->dims[m->nlayers];
  const float *logits = m->act[m->nlayers];
  double loss = 0;
  for (int r = 0; r < rows; r++) {
    const float *z = logits + (size_t)r * c;
    float mx = z[0];
    for (int j = 1; j < c; j++)
      mx = z[j] > mx ? z[j] : mx;
    double sum = 0;
    for (int j = 0; j < c; j++)
      sum += exp((double)(z[j] - mx));
    loss += log(sum) - (double)(z[labels[r]] - mx);
    for (int j = 0; j < c; j++) {
      double p = exp((double)(z[j] - mx)) / sum;
      m->dz[(size_t)r * c + j] = (float)((p - (j == labels[r])) / rows);
    }
  }
  return loss;
}

void mlp_backward_params(mlp_t *m, int l, int rows, float *gw, float *gb) {
  int in = m->dims[l], out = m->dims[l + 1];
  /* gW (in x out) = act[l]^T (in x rows) . dz (rows x out) */
  struct mm_job job = {0, in, out, rows, m->act[l], m->dz, 1, in, out, gw, out, NULL};
  mm(&job);
  for (int j = 0; j < out; j++)
    gb[j] = 0;
  for (int r = 0; r < rows; r++)
    for (int j = 0; j < out; j++)
      gb[j] += m->dz[(size_t)r * out + j];
}

void mlp_backward_input(mlp_t *m, int l, int rows) {
  int in = m->dims[l], out = m->dims[l + 1];
  /* dz' (rows x in) = dz (rows x out) . W^T, W being in x out */
  struct mm_job job = {1, rows, in, out, m->dz, m->w[l], out, 0, out, m->dz_next, in, NULL};
  mm(&job);
  const float *a = m->act[l]; /* ReLU of layer l-1: zero where its output was clipped */
  for (size_t k = 0; k < (size_t)rows * in; k++)
    if (a[k] <= 0) m->dz_next[k] = 0;
  float *t = m->dz;
  m->dz = m->dz_next;
  m->dz_next = t;
}

void mlp_sgd(float *w, const float *g, uint64_t n, float lr) {
  for (uint64_t k = 0; k < n; k++)
    w[k] -= lr * g[k];
}
