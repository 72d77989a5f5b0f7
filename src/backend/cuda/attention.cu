// defines: sf::cuda::attention_forward (attention_bwd.cu: attention_backward) — causal GQA
// attention over packed samples (cu_seqlens), flash-style: S×S never leaves the chip.
//
// Tensor-core path (head_dim 16/32/64/128, 16-byte aligned tensors): tiles of 64 query rows ×
// 64 keys, 4 warps of 16 rows, mma.sync m16n8k16 with the score accumulators reused in registers
// as the A operand of the next product (FlashAttention-2's layout). Scores run in the log2 domain
// (scale·log2 e folded in, exp2f). Tiles are aligned to T, not to samples: a mask keeps key j
// for query t iff start(t) <= j <= t, so packed and unpacked batches take the same path.
//   forward : per (q tile, head) — online softmax, O and lse (F32, natural log) written once;
//   backward: Δ = rowsum(dO∘O) (one warp per row), then dQ per (q tile, head) and dK/dV per
//             (key tile, kv head) summing the group's query heads — each output written by one
//             block, no atomics, deterministic.
// Generic path (any head_dim <= 256): one warp per query (or key) row, fp32 FMA; used for the
// small head_dims of test models.
#include <algorithm>
#include <utility>

#include "backend/cuda/attention_common.cuh"

namespace sf::cuda {
namespace {

using namespace attn;

// ---------------------------------------------------------------- forward
template <int D>
__global__ void __launch_bounds__(128)
    attn_fwd_kernel(bf16* __restrict__ out, float* __restrict__ lse, const bf16* __restrict__ q,
                    const bf16* __restrict__ k, const bf16* __restrict__ v,
                    const int32_t* __restrict__ cu, int nseq, int64_t T, int NH, int NKV,
                    float scale_log2) {
  using C = Cfg<D>;
  constexpr int S = C::kS;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* Qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* Ks = Qs + C::kRows * S;
  bf16* Vs = Ks + C::kRows * S;
  __shared__ int qstart[64];

  const int tile = gridDim.x - 1 - blockIdx.x;  // the longest causal rows first
  const int h = blockIdx.y, g_kv = h / (NH / NKV);
  const int64_t q0 = int64_t(tile) * C::kRows;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;

  if (threadIdx.x < 64) {
    const int64_t t = q0 + threadIdx.x;
    qstart[threadIdx.x] = t < T ? cu[seq_index(cu, nseq, t)] : INT32_MAX;
  }
  load_tile<64, D, S, 128>(Qs, q, q0, T, NH, h);
  __syncthreads();

  const int ra = warp * 16 + g, rb = ra + 8;
  const int64_t ta = q0 + ra, tb = q0 + rb;
  const int sa = qstart[ra], sb = qstart[rb];
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) ldsm_x4(qf[kk], a_addr(Qs, S, warp * 16, kk * 16, lane));

  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float ma = -INFINITY, mb = -INFINITY, la = 0.0f, lb = 0.0f;

  const int64_t k_last = std::min<int64_t>(q0 + 63, T - 1);
  for (int64_t k0 = (int64_t(qstart[0]) / 64) * 64; k0 <= k_last; k0 += 64) {
    __syncthreads();
    load_tile<64, D, S, 128>(Ks, k, k0, T, NKV, g_kv);
    load_tile<64, D, S, 128>(Vs, v, k0, T, NKV, g_kv);
    __syncthreads();
    float s[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t b[4];
        ldsm_x4(b, b_addr(Ks, S, np * 16, kk * 16, lane));
        mma(s[2 * np], qf[kk], b[0], b[1]);
        mma(s[2 * np + 1], qf[kk], b[2], b[3]);
      }
    }
    float mxa = -INFINITY, mxb = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t j = k0 + nt * 8 + 2 * tq + e;
        s[nt][e] = (j >= sa && j <= ta) ? s[nt][e] * scale_log2 : -INFINITY;
        s[nt][2 + e] = (j >= sb && j <= tb) ? s[nt][2 + e] * scale_log2 : -INFINITY;
        mxa = fmaxf(mxa, s[nt][e]);
        mxb = fmaxf(mxb, s[nt][2 + e]);
      }
    }
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      mxa = fmaxf(mxa, __shfl_xor_sync(0xffffffffu, mxa, off));
      mxb = fmaxf(mxb, __shfl_xor_sync(0xffffffffu, mxb, off));
    }
    const float na = fmaxf(ma, mxa), nb = fmaxf(mb, mxb);
    // a row with no visible key yet keeps m = -inf: use 0 as the reference to avoid inf - inf
    const float refa = na == -INFINITY ? 0.0f : na, refb = nb == -INFINITY ? 0.0f : nb;
    const float alpha_a = exp2f(ma - refa), alpha_b = exp2f(mb - refb);
    ma = na, mb = nb;
    float suma = 0.0f, sumb = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[nt][e] = exp2f(s[nt][e] - refa);
        s[nt][2 + e] = exp2f(s[nt][2 + e] - refb);
        suma += s[nt][e];
        sumb += s[nt][2 + e];
      }
    }
    la = la * alpha_a + suma;
    lb = lb * alpha_b + sumb;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      o[i][0] *= alpha_a, o[i][1] *= alpha_a;
      o[i][2] *= alpha_b, o[i][3] *= alpha_b;
    }
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) {
      uint32_t a[4];
      acc_to_a(a, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        uint32_t b[4];
        ldsm_x4_t(b, bt_addr(Vs, S, dp * 16, kc * 16, lane));
        mma(o[2 * dp], a, b[0], b[1]);
        mma(o[2 * dp + 1], a, b[2], b[3]);
      }
    }
  }
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    la += __shfl_xor_sync(0xffffffffu, la, off);
    lb += __shfl_xor_sync(0xffffffffu, lb, off);
  }
  const float ia = la > 0.0f ? 1.0f / la : 0.0f, ib = lb > 0.0f ? 1.0f / lb : 0.0f;
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    const int col = i * 8 + 2 * tq;
    if (ta < T)
      *reinterpret_cast<__nv_bfloat162*>(out + (ta * NH + h) * D + col) =
          __floats2bfloat162_rn(o[i][0] * ia, o[i][1] * ia);
    if (tb < T)
      *reinterpret_cast<__nv_bfloat162*>(out + (tb * NH + h) * D + col) =
          __floats2bfloat162_rn(o[i][2] * ib, o[i][3] * ib);
  }
  if (tq == 0) {
    if (ta < T) lse[ta * NH + h] = (ma + log2f(la)) * kLn2;
    if (tb < T) lse[tb * NH + h] = (mb + log2f(lb)) * kLn2;
  }
}

__global__ void attn_fwd_generic(bf16* out, float* lse, const bf16* q, const bf16* k, const bf16* v,
                                 const int32_t* cu, int nseq, int64_t T, int NH, int NKV, int D,
                                 float scale) {
  const int64_t task = int64_t(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (task >= T * NH) return;
  const int64_t t = task / NH;
  const int h = int(task % NH), gk = h / (NH / NKV);
  const int64_t j0 = cu[seq_index(cu, nseq, t)];
  float qr[kGenMax], acc[kGenMax];
#pragma unroll
  for (int i = 0; i < kGenMax; ++i) {
    const int d = lane + 32 * i;
    qr[i] = d < D ? __bfloat162float(q[(t * NH + h) * D + d]) : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t j = j0; j <= t; ++j) {
    const bf16* kr = k + (j * NKV + gk) * D;
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < kGenMax; ++i) {
      const int d = lane + 32 * i;
      if (d < D) s += qr[i] * __bfloat162float(kr[d]);
    }
    s = warp_sum(s) * scale;
    const float mn = fmaxf(m, s), alpha = __expf(m - mn), p = __expf(s - mn);
    l = l * alpha + p;
    m = mn;
    const bf16* vr = v + (j * NKV + gk) * D;
#pragma unroll
    for (int i = 0; i < kGenMax; ++i) {
      const int d = lane + 32 * i;
      acc[i] = acc[i] * alpha + (d < D ? p * __bfloat162float(vr[d]) : 0.0f);
    }
  }
#pragma unroll
  for (int i = 0; i < kGenMax; ++i) {
    const int d = lane + 32 * i;
    if (d < D) out[(t * NH + h) * D + d] = __float2bfloat16(acc[i] / l);
  }
  if (lane == 0) lse[t * NH + h] = m + logf(l);
}

template <int D>
void fwd_mma(const Shape& s, Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, Tensor cu,
             float scale, cudaStream_t st) {
  const size_t smem = 3 * Cfg<D>::kTile;
  set_smem<D>(attn_fwd_kernel<D>, smem);
  const dim3 grid(unsigned((s.T + 63) / 64), unsigned(s.NH));
  attn_fwd_kernel<D><<<grid, 128, smem, st>>>(out.as<bf16>(), lse.f32(), q.as<bf16>(), k.as<bf16>(),
                                              v.as<bf16>(), cu.i32(), s.nseq, s.T, s.NH, s.NKV,
                                              scale * kLog2e);
}

}  // namespace

void attention_forward(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens,
                       float scale, cudaStream_t stream) {
  const Shape s = check_shapes("attention_forward", out, lse, q, k, v, cu_seqlens);
  if (s.T == 0) return;
  SF_CHECK(s.D <= 32 * kGenMax, "attention_forward: head_dim ", s.D, " > ", 32 * kGenMax,
           " is not supported by the CUDA backend");
  if (use_mma(s.D) && aligned16({out.data, q.data, k.data, v.data})) {
    switch (s.D) {
      case 16:
        fwd_mma<16>(s, out, lse, q, k, v, cu_seqlens, scale, stream);
        break;
      case 32:
        fwd_mma<32>(s, out, lse, q, k, v, cu_seqlens, scale, stream);
        break;
      case 64:
        fwd_mma<64>(s, out, lse, q, k, v, cu_seqlens, scale, stream);
        break;
      default:
        fwd_mma<128>(s, out, lse, q, k, v, cu_seqlens, scale, stream);
        break;
    }
  } else {
    attn_fwd_generic<<<grid_for(s.T * s.NH, 4), 128, 0, stream>>>(
        out.as<bf16>(), lse.f32(), q.as<bf16>(), k.as<bf16>(), v.as<bf16>(), cu_seqlens.i32(),
        s.nseq, s.T, s.NH, s.NKV, s.D, scale);
  }
  SF_LAUNCH_CHECK("attention_forward q ", q.shape_str(), " k ", k.shape_str(), " cu_seqlens ",
                  cu_seqlens.shape_str());
}

}  // namespace sf::cuda
