/*
 * mlp.h - the model of the ddp_train example: a multilayer perceptron (linear + ReLU layers, a
 * linear output and softmax cross-entropy), forward and backward in plain C, and the
 * deterministic synthetic data it learns. Nothing here knows about ranks or DDP: the training
 * loop in ddp_train.c drives backward one layer at a time and tells the DDP layer about each
 * gradient as it is produced.
 */
#ifndef MLP_H
#define MLP_H

#include <stdint.h>

#define MLP_MAX_LAYERS 8

typedef struct {
  int nlayers;
  int dims[MLP_MAX_LAYERS + 1];   /* dims[0] inputs ... dims[nlayers] classes */
  float *w[MLP_MAX_LAYERS];       /* layer l: dims[l] x dims[l+1], row-major (in x out) */
  float *b[MLP_MAX_LAYERS];       /* dims[l+1] */
  int batch;                      /* rows the buffers below hold */
  float *act[MLP_MAX_LAYERS + 1]; /* act[l]: input of layer l (act[0] = x); act[nlayers] logits */
  float *dz;                      /* gradient of the current layer's output, batch x max dim */
  float *dz_next;                 /* scratch for the layer below */
} mlp_t;

/* Sets the kernels' thread count (1 = no threads). Call once, before any other call. */
void mlp_set_threads(int n);

/* fn(ctx) is called between blocks of every matrix product (about every 0.1-0.5 ms of work)
 * when the kernels run on the calling thread alone: the training loop lets communication
 * progress from there. NULL turns it off. */
void mlp_set_progress(void (*fn)(void *ctx), void *ctx);

/* Allocates the model for up to `batch` rows and initialises the weights (He normal, from
 * `seed`; biases 0). The initial values depend only on dims and seed. Returns 0 or -1. */
int mlp_create(mlp_t *m, int nlayers, const int *dims, int batch, uint64_t seed);
void mlp_free(mlp_t *m);
uint64_t mlp_param_count(const mlp_t *m);

/* The synthetic task: sample s of the infinite stream (s = step * global_batch + row) is a
 * noisy point around the centroid of its class. x is rows x dims[0]. */
void mlp_make_batch(const mlp_t *m, uint64_t first_sample, int rows, uint64_t seed, float *x,
                    int *labels);

/* Forward over `rows` rows of x (copied into act[0]); logits in act[nlayers]. */
void mlp_forward(mlp_t *m, const float *x, int rows);
/* Sum over rows of the cross-entropy loss, and dz = d(mean loss over rows)/d logits. */
double mlp_loss_backward(mlp_t *m, const int *labels, int rows);
/* Layer l's weight and bias gradients from dz (overwritten, not accumulated). */
void mlp_backward_params(mlp_t *m, int l, int rows, float *gw, float *gb);
/* dz for layer l-1 (through layer l's weights and l-1's ReLU); l >= 1. */
void mlp_backward_input(mlp_t *m, int l, int rows);
/* w -= lr * g over n elements. */
void mlp_sgd(float *w, const float *g, uint64_t n, float lr);

#endif
