// defines: sf::cuda::attention_decode — causal GQA attention of the last Tq tokens of one sequence
// against its Tk cached keys and values (query i sees keys 0 .. Tk-Tq+i), for decoding.
//
// One block per (query, head), kWarps warps; warp w takes keys w, w + kWarps, …, its 32 lanes
// split the head dimension (lane l holds elements l, l + 32, …: each key row is read by a warp
// in coalesced 64-byte pieces). Every warp keeps an online softmax (running max, sum and the
// weighted V row) in fp32; the warps' partials are then merged through shared memory. Scores,
// weights and sums are fp32 throughout (P is not rounded to bf16, unlike the tensor-core
// attention): the only bf16 rounding is the output's. Decoding has one query a step, so this
// is bound by reading the cache, which every block does once per (query, head).
#include <cmath>
#include <utility>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace sf::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxDim = 256;  // 8 elements a lane

template <int P>  // elements of the head dimension a lane holds: ceil(D / 32)
__global__ void __launch_bounds__(kWarps * 32)
    attn_decode_kernel(bf16* __restrict__ out, const bf16* __restrict__ q,
                       const bf16* __restrict__ k, const bf16* __restrict__ v, int64_t Tq,
                       int64_t Tk, int NH, int NKV, int D, float scale) {
  __shared__ float s_m[kWarps], s_l[kWarps];
  __shared__ float s_acc[kWarps][kMaxDim];
  const int64_t i = blockIdx.x;
  const int h = blockIdx.y, g = h / (NH / NKV);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t last = Tk - Tq + i;  // the query's own key

  float qr[P], acc[P];
  const bf16* qrow = q + (i * NH + h) * int64_t(D);
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int d = lane + 32 * p;
    qr[p] = d < D ? __bfloat162float(qrow[d]) : 0.0f;
    acc[p] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = warp; j <= last; j += kWarps) {
    const bf16* kr = k + (j * NKV + g) * int64_t(D);
    const bf16* vr = v + (j * NKV + g) * int64_t(D);
    float s = 0.0f;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int d = lane + 32 * p;
      if (d < D) s = fmaf(qr[p], __bfloat162float(kr[d]), s);
    }
    s = warp_sum(s) * scale;
    const float mn = fmaxf(m, s);
    const float alpha = expf(m - mn), w = expf(s - mn);  // m = -inf at first: alpha = 0
    l = l * alpha + w;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int d = lane + 32 * p;
      if (d < D) acc[p] = fmaf(w, __bfloat162float(vr[d]), acc[p] * alpha);
    }
    m = mn;
  }
  if (lane == 0) s_m[warp] = m, s_l[warp] = l;
#pragma unroll
  for (int p = 0; p < P; ++p) {
    const int d = lane + 32 * p;
    if (d < D) s_acc[warp][d] = acc[p];
  }
  __syncthreads();
  // Warp 0 always has key 0, so the merged max is finite; a warp with no key has m = -inf and
  // weighs exp(-inf) = 0.
  float mx = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_m[w]);
  float sum = 0.0f, f[kWarps];
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    f[w] = expf(s_m[w] - mx);
    sum += s_l[w] * f[w];
  }
  bf16* orow = out + (i * NH + h) * int64_t(D);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) o += s_acc[w][d] * f[w];
    orow[d] = __float2bfloat16(o / sum);
  }
}

template <int P>
void launch(Tensor out, Tensor q, Tensor k, Tensor v, float scale, cudaStream_t stream) {
  const int64_t Tq = q.dim(0), NH = q.dim(1), D = q.dim(2), Tk = k.dim(0), NKV = k.dim(1);
  attn_decode_kernel<P><<<dim3(unsigned(Tq), unsigned(NH)), kWarps * 32, 0, stream>>>(
      out.as<bf16>(), q.as<bf16>(), k.as<bf16>(), v.as<bf16>(), Tq, Tk, int(NH), int(NKV), int(D),
      scale);
}

}  // namespace

void attention_decode(Tensor out, Tensor q, Tensor k, Tensor v, float scale, cudaStream_t stream) {
  const char* op = "attention_decode";
  for (auto [name, t] : {std::pair{"out", &out}, {"q", &q}, {"k", &k}, {"v", &v}})
    check_dtype(op, name, *t, DType::kBF16);
  const int64_t Tq = q.dim(0), NH = q.dim(1), D = q.dim(2), Tk = k.dim(0), NKV = k.dim(1);
  SF_CHECK(q.ndim == 3 && k.ndim == 3 && v.ndim == 3 && k.dim(2) == D && v.dim(0) == Tk &&
               v.dim(1) == NKV && v.dim(2) == D && NKV > 0 && NH % NKV == 0 && Tq >= 1 &&
               Tk >= Tq && out.numel() == q.numel() && out.cols() == D,
           op, ": shapes do not match q[Tq,NH,D], k/v[Tk,NKV,D] with Tk >= Tq >= 1 (NH a ",
           "multiple of NKV), out[Tq,NH,D]: q ", q.shape_str(), ", k ", k.shape_str(), ", v ",
           v.shape_str(), ", out ", out.shape_str());
  SF_CHECK(D >= 1 && D <= kMaxDim, op, ": head_dim ", D, " is above the kernel's ", kMaxDim);
  SF_CHECK(Tq < (int64_t(1) << 31) && NH <= 65535, op, ": ", Tq, " queries × ", NH,
           " heads exceed the launch grid");
  switch ((D + 31) / 32) {
    case 1:
      launch<1>(out, q, k, v, scale, stream);
      break;
    case 2:
      launch<2>(out, q, k, v, scale, stream);
      break;
    case 3:
      launch<3>(out, q, k, v, scale, stream);
      break;
    case 4:
      launch<4>(out, q, k, v, scale, stream);
      break;
    case 5:
      launch<5>(out, q, k, v, scale, stream);
      break;
    case 6:
      launch<6>(out, q, k, v, scale, stream);
      break;
    case 7:
      launch<7>(out, q, k, v, scale, stream);
      break;
    default:
      launch<8>(out, q, k, v, scale, stream);
      break;
  }
  SF_LAUNCH_CHECK(op, " q ", q.shape_str(), " k ", k.shape_str());
}

}  // namespace sf::cuda
