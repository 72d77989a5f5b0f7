// defines: sf::AdamWParams, sf::AdamWConsts, sf::AdamWWrite, sf::adamw_consts, sf::adamw_step,
// sf::adamw_step_reference, sf::sum_squares,
//          sf::OptimIsa (the instruction-set paths, so tests can run each one)
// AdamW on the CPU with torch.optim.AdamW semantics (single-tensor path, decoupled weight decay,
// bias correction, eps outside the sqrt), threaded over tiles, SIMD where the CPU has it.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/dtype.h"

namespace sf {

class ThreadPool;

struct AdamWParams {
  float lr;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
};

// What a step stores. kWeights stores only p, kMoments only m and v, from the same arithmetic:
// kWeights then kMoments, with the same inputs (p, m, v, gradient, step, hyperparameters, scale),
// is the kAll step bit for bit. The clipped update stores the weights the next forward needs
// first and the moments while the GPU runs the backward (docs/decisions.md).
enum class AdamWWrite : uint8_t { kAll, kWeights, kMoments };

// Bytes a step moves through memory per parameter: it reads what it needs of p, m, v and the
// gradient (grad_bytes each) and writes what `what` stores — 24 + g for kAll, 16 + g for either
// half (the master alone: p, m, v, g read, p written; the moments alone: m, v, g read, m, v
// written).
constexpr double adamw_bytes_per_param(AdamWWrite what, double grad_bytes) {
  return (what == AdamWWrite::kAll ? 24.0 : 16.0) + grad_bytes;
}

// One torch.optim.AdamW step over a contiguous range of n params. p, m, v: fp32; g: F32 or BF16,
// multiplied by grad_scale (the clip factor) first. `step` is 1-based (the value torch's state
// "step" has after its increment). If p_bf16 is non-null, the updated p is also written there
// as bf16 (round to nearest even), ready for the next host-to-device copy.
// Bit-exact with adamw_step_reference on every path and thread count. Returns how many of the
// updated p are not finite (inf or NaN), counted tile by tile as each is written (from cache).
// If sumsq is non-null, *sumsq is set to Σ g² of the unscaled gradient, the same bits as
// sum_squares(g, g_dtype, n), summed from each tile as it is read: the update without clipping
// needs no second pass over the gradient for the norm.
int64_t adamw_step(float* p, float* m, float* v, const void* g, DType g_dtype, int64_t n,
                   int64_t step, const AdamWParams& hp, float grad_scale,
                   uint16_t* p_bf16 = nullptr, AdamWWrite what = AdamWWrite::kAll,
                   double* sumsq = nullptr);

// The same step as plain scalar code, one thread: the specification the fast path is tested
// against. Per element, in fp32 and in this order (torch's kernels):
//   g = g*scale;  p = p*(1-lr*wd);  m = fma(w, g-m, m) with w = 1-b1  (torch's vectorised lerp;
//   for w >= 0.5: fma(w-1, g-m, g));  v = v*b2 + ((1-b2)*g)*g;  denom = sqrt(v)/sqrt(bc2) + eps;
//   p = p + (-step_size*m)/denom,  step_size = lr/bc1.
// Scalars are formed in double from the decimal values of the float hyperparameters (as Python
// floats are) and rounded to fp32 once, as torch does when it applies a Python scalar to an fp32
// tensor.
void adamw_step_reference(float* p, float* m, float* v, const void* g, DType g_dtype, int64_t n,
                          int64_t step, const AdamWParams& hp, float grad_scale,
                          uint16_t* p_bf16 = nullptr, AdamWWrite what = AdamWWrite::kAll);

// The per-call scalars of a step, each rounded to fp32 once, as torch applies Python scalars to
// fp32 tensors (see adamw_step_reference). Exposed so a device kernel runs the same arithmetic.
struct AdamWConsts {
  float scale;     // grad_scale
  float decay;     // 1 - lr*wd
  float w;         // lerp weight 1 - beta1
  bool w_small;    // |w| < 0.5: torch's lerp picks m + w*(g-m), else g + (w-1)*(g-m)
  float beta2;     // v*beta2
  float c2;        // 1 - beta2
  float bc2_sqrt;  // sqrt(1 - beta2^step)
  float eps;
  float neg_step;  // -lr / (1 - beta1^step)
};
// Validates the hyperparameters (errors name the bad one) and forms the scalars.
AdamWConsts adamw_consts(int64_t step, const AdamWParams& hp, float grad_scale);

// Σ g[i]² in double, threaded. Deterministic: fixed blocks, fixed lanes inside a block and an
// ordered reduce, so the result is the same bits for every thread count and SIMD path.
double sum_squares(const void* g, DType g_dtype, int64_t n);

// Instruction-set paths. adamw_step/sum_squares above use optim_best_isa() and the global pool.
enum class OptimIsa : uint8_t { kScalar, kAvx2, kAvx512 };
bool optim_isa_supported(OptimIsa isa);
OptimIsa optim_best_isa();
std::string_view optim_isa_name(OptimIsa isa);

int64_t adamw_step(OptimIsa isa, ThreadPool& pool, float* p, float* m, float* v, const void* g,
                   DType g_dtype, int64_t n, int64_t step, const AdamWParams& hp, float grad_scale,
                   uint16_t* p_bf16 = nullptr, AdamWWrite what = AdamWWrite::kAll,
                   double* sumsq = nullptr);
double sum_squares(OptimIsa isa, ThreadPool& pool, const void* g, DType g_dtype, int64_t n);

}  // namespace sf
