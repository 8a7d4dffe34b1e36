// The compute operations of a backend, each declared once: the Backend interface, the backends, the CPU kernel sets
// and the kernel functions all expand these lists instead of repeating the parameter lists.
//
// Each list calls X(name, (parameters)) once per operation; every operation returns void. What an operation does
// is written beside it here, and holds for every implementation. All pointers are to memory from
// Backend::allocate() unless a parameter says host. Example (what backend.h does):
//
//   #define PSHARD_PURE_OP(name, params) virtual void name params = 0;
//   PSHARD_BACKEND_COMPUTE_OPS(PSHARD_PURE_OP)
//
// The comments are C comments: a line comment would swallow the macro's line continuation.
#pragma once

// ---- BLAS ----
/* Row-major C[m x n] = alpha * op(A) * op(B) + beta * C; op(A) is m x k, op(B) is k x n. */
#define PSHARD_GEMM_OPS(X)                                                                                        \
  X(gemm, (bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, \
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc))

// ---- elementwise, bias, activation, dropout ----
#define PSHARD_ELEMENTWISE_OPS(X)                                                                                \
  /* y += alpha * x */                                                                                           \
  X(axpy, (int64_t n, float alpha, const float* x, float* y))                                                    \
  /* y = a + b */                                                                                                \
  X(add, (int64_t n, const float* a, const float* b, float* y))                                                  \
  /* y = a * b */                                                                                                \
  X(multiply, (int64_t n, const float* a, const float* b, float* y))                                             \
  /* y[o, c, i] += bias[c] for y of shape [outer, channels, inner] (Linear: inner = 1; Conv: inner = H*W). */    \
  X(add_bias, (float* y, const float* bias, int64_t outer, int64_t channels, int64_t inner))                     \
  /* db[c] = sum over o, i of dy[o, c, i] (overwrites db). */                                                    \
  X(bias_grad, (const float* dy, int64_t outer, int64_t channels, int64_t inner, float* db))                     \
  /* y = max(x, 0) */                                                                                            \
  X(relu_forward, (const float* x, float* y, int64_t n))                                                         \
  /* dx = y > 0 ? dy : 0 */                                                                                      \
  X(relu_backward, (const float* y, const float* dy, float* dx, int64_t n))                                      \
  /* mask[i] = keep(seed, counter, i) ? 1/(1-p) : 0 with dropout_keep() of models/cpu/kernels.h (a counter-based \
     hash, so every backend draws the same mask); y = x * mask. */                                               \
  X(dropout_forward, (const float* x, float* y, float* mask, int64_t n, float p, uint64_t seed, uint64_t counter))

// ---- convolution ----
#define PSHARD_CONV_OPS(X)                                                                                           \
  /* y = conv(x, w) + bias (bias may be null). x [n, c_in, h, w], y [n, c_out, h_out, w_out]. */                     \
  X(conv2d_forward, (const ConvShape& s, const float* x, const float* w, const float* bias, float* y))               \
  /* Overwrites dw [c_out, c_in, kh, kw], db [c_out] (null: no bias) and dx (null: not needed, e.g. first layer). */ \
  X(conv2d_backward,                                                                                                 \
    (const ConvShape& s, const float* x, const float* w, const float* dy, float* dx, float* dw, float* db))

// ---- pooling ----
#define PSHARD_POOL_OPS(X)                                                                                \
  X(maxpool2d_forward, (const PoolShape& s, const float* x, float* y))                                    \
  /* dx (overwritten) gets dy at the first position in each window that holds the maximum. */             \
  X(maxpool2d_backward, (const PoolShape& s, const float* x, const float* y, const float* dy, float* dx)) \
  X(avgpool2d_forward, (const PoolShape& s, const float* x, float* y))                                    \
  X(avgpool2d_backward, (const PoolShape& s, const float* dy, float* dx))

// ---- batch normalisation over [n, c, hw] (per channel c; BatchNorm1d: hw = 1) ----
#define PSHARD_BATCHNORM_OPS(X)                                                                                       \
  /* Batch statistics; running_mean/var updated as r = (1 - momentum) * r + momentum * batch (unbiased variance);     \
     save_mean/save_invstd [c] keep what backward needs. */                                                           \
  X(batchnorm_forward_train,                                                                                          \
    (int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma, const float* beta, float eps,              \
     float momentum, float* running_mean, float* running_var, float* save_mean, float* save_invstd, float* y))        \
  X(batchnorm_forward_eval, (int64_t n, int64_t c, int64_t hw, const float* x, const float* gamma, const float* beta, \
                             float eps, const float* running_mean, const float* running_var, float* y))               \
  /* Overwrites dx, dgamma, dbeta. */                                                                                 \
  X(batchnorm_backward, (int64_t n, int64_t c, int64_t hw, const float* x, const float* dy, const float* gamma,       \
                         const float* save_mean, const float* save_invstd, float* dx, float* dgamma, float* dbeta))

// ---- losses ----
// The forwards hand their totals to the host, so their device launchers (models/cuda/kernels.h) differ; the
// backwards are listed in PSHARD_LOSS_BACKWARD_OPS.
#define PSHARD_LOSS_FORWARD_OPS(X)                                                                                  \
  /* logits [n, classes], labels [n] in device memory. probs [n, classes] keeps the softmax for backward.           \
     loss_sum (host) = sum over samples of -log p[label]; correct (host) = samples whose first argmax is the label. \
     A label outside [0, classes) is an Error naming the sample. */                                                 \
  X(softmax_xent_forward, (const float* logits, const int32_t* labels, int64_t n, int64_t classes, float* probs,    \
                           double* loss_sum, int64_t* correct))                                                     \
  /* pred, target [n, dim]; loss_sum (host) = sum over samples of mean over dim of (pred - target)^2. */            \
  X(mse_forward, (const float* pred, const float* target, int64_t n, int64_t dim, double* loss_sum))
#define PSHARD_LOSS_BACKWARD_OPS(X)                                                                                 \
  /* dlogits = (probs - onehot(labels)) / n: the gradient of the MEAN loss. */                                      \
  X(softmax_xent_backward, (const float* probs, const int32_t* labels, int64_t n, int64_t classes, float* dlogits)) \
  /* dpred = 2 (pred - target) / (n * dim): the gradient of the mean over all n * dim elements. */                  \
  X(mse_backward, (const float* pred, const float* target, int64_t n, int64_t dim, float* dpred))

// ---- residual shortcuts (ResNet option A) ----
// The CPU functions also take the two activations' channel blocks (models/cpu/kernels.h).
#define PSHARD_SHORTCUT_OPS(X)                                                                                \
  /* y [n, c_out, h_out, w_out] = x [n, c_in, h, w] subsampled by `stride`, placed at channel offset          \
     (c_out - c_in) / 2, zeros elsewhere (h_out = ceil(h / stride)). Both in the backend's layout. */         \
  X(shortcut_pad_forward,                                                                                     \
    (int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out, const float* x, float* y)) \
  /* dx += the part of dy that forward took from x. */                                                        \
  X(shortcut_pad_backward,                                                                                    \
    (int64_t n, int64_t c_in, int64_t h, int64_t w, int64_t stride, int64_t c_out, const float* dy, float* dx))

// The operations the CPU backend runs on one of two kernel sets, oneDNN or the reference (models/cpu/kernel_set.h).
#define PSHARD_KERNEL_SET_OPS(X) PSHARD_GEMM_OPS(X) PSHARD_CONV_OPS(X) PSHARD_POOL_OPS(X) PSHARD_BATCHNORM_OPS(X)

// Every compute operation of Backend.
// clang-format off
#define PSHARD_BACKEND_COMPUTE_OPS(X) \
  PSHARD_GEMM_OPS(X)                  \
  PSHARD_ELEMENTWISE_OPS(X)           \
  PSHARD_CONV_OPS(X)                  \
  PSHARD_POOL_OPS(X)                  \
  PSHARD_BATCHNORM_OPS(X)             \
  PSHARD_LOSS_FORWARD_OPS(X)          \
  PSHARD_LOSS_BACKWARD_OPS(X)         \
  PSHARD_SHORTCUT_OPS(X)
// clang-format on

// Declarations made from the lists: a pure virtual method, its override, and a plain function.
#define PSHARD_PURE_OP(name, params) virtual void name params = 0;
#define PSHARD_OVERRIDE_OP(name, params) void name params override;
#define PSHARD_FUNCTION_OP(name, params) void name params;
// A parameter list without its parentheses, for declarations that add parameters (the CUDA launchers' stream).
#define PSHARD_OP_PARAMS(...) __VA_ARGS__
