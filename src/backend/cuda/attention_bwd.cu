// defines: sf::cuda::attention_backward — the backward of attention.cu's causal GQA attention
// (see there for the tiling): Δ = rowsum(dO∘O), then dQ per (q tile, head) and dK/dV per (key
// tile, kv head) summing the group's query heads, each output written by one block (no atomics,
// deterministic); the generic path for other head dims.
#include <algorithm>
#include <tuple>
#include <utility>

#include "backend/cuda/attention_common.cuh"

namespace sf::cuda {
namespace {

using namespace attn;

// ---------------------------------------------------------------- Δ = rowsum(dO ∘ O)
__global__ void attn_delta_kernel(float* __restrict__ delta, const bf16* __restrict__ dout,
                                  const bf16* __restrict__ out, int64_t rows, int D) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  float s = 0.0f;
  for (int d = lane; d < D; d += 32)
    s += __bfloat162float(dout[row * D + d]) * __bfloat162float(out[row * D + d]);
  s = warp_sum(s);
  if (lane == 0) delta[row] = s;
}

// ---------------------------------------------------------------- dQ
template <int D>
__global__ void __launch_bounds__(128)
    attn_dq_kernel(bf16* __restrict__ dq, const bf16* __restrict__ dout, const bf16* __restrict__ q,
                   const bf16* __restrict__ k, const bf16* __restrict__ v,
                   const float* __restrict__ lse, const float* __restrict__ delta,
                   const int32_t* __restrict__ cu, int nseq, int64_t T, int NH, int NKV,
                   float scale, float scale_log2) {
  using C = Cfg<D>;
  constexpr int S = C::kS;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* Qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* Os = Qs + 64 * S;  // dO
  bf16* Ks = Os + 64 * S;
  bf16* Vs = Ks + 64 * S;
  __shared__ int qstart[64];

  const int tile = gridDim.x - 1 - blockIdx.x;
  const int h = blockIdx.y, g_kv = h / (NH / NKV);
  const int64_t q0 = int64_t(tile) * 64;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  if (threadIdx.x < 64) {
    const int64_t t = q0 + threadIdx.x;
    qstart[threadIdx.x] = t < T ? cu[seq_index(cu, nseq, t)] : INT32_MAX;
  }
  load_tile<64, D, S, 128>(Qs, q, q0, T, NH, h);
  load_tile<64, D, S, 128>(Os, dout, q0, T, NH, h);
  __syncthreads();
  const int ra = warp * 16 + g, rb = ra + 8;
  const int64_t ta = q0 + ra, tb = q0 + rb;
  const int sa = qstart[ra], sb = qstart[rb];
  const float lsa = ta < T ? lse[ta * NH + h] * kLog2e : 0.0f;
  const float lsb = tb < T ? lse[tb * NH + h] * kLog2e : 0.0f;
  const float dla = ta < T ? delta[ta * NH + h] : 0.0f;
  const float dlb = tb < T ? delta[tb * NH + h] : 0.0f;

  float acc[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;

  const int64_t k_last = std::min<int64_t>(q0 + 63, T - 1);
  for (int64_t k0 = (int64_t(qstart[0]) / 64) * 64; k0 <= k_last; k0 += 64) {
    __syncthreads();
    load_tile<64, D, S, 128>(Ks, k, k0, T, NKV, g_kv);
    load_tile<64, D, S, 128>(Vs, v, k0, T, NKV, g_kv);
    __syncthreads();
    float s[8][4], dp[8][4];
#pragma unroll
    for (int i = 0; i < 8; ++i)
      s[i][0] = s[i][1] = s[i][2] = s[i][3] = dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t aq[4], ao[4];
      ldsm_x4(aq, a_addr(Qs, S, warp * 16, kk * 16, lane));
      ldsm_x4(ao, a_addr(Os, S, warp * 16, kk * 16, lane));
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t b[4];
        ldsm_x4(b, b_addr(Ks, S, np * 16, kk * 16, lane));
        mma(s[2 * np], aq, b[0], b[1]);
        mma(s[2 * np + 1], aq, b[2], b[3]);
        ldsm_x4(b, b_addr(Vs, S, np * 16, kk * 16, lane));
        mma(dp[2 * np], ao, b[0], b[1]);
        mma(dp[2 * np + 1], ao, b[2], b[3]);
      }
    }
    // dS = P ∘ (dP − Δ), P = exp2(s·scale·log2e − lse·log2e); masked entries are 0
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t j = k0 + nt * 8 + 2 * tq + e;
        const float pa = (j >= sa && j <= ta) ? exp2f(s[nt][e] * scale_log2 - lsa) : 0.0f;
        const float pb = (j >= sb && j <= tb) ? exp2f(s[nt][2 + e] * scale_log2 - lsb) : 0.0f;
        s[nt][e] = pa * (dp[nt][e] - dla);
        s[nt][2 + e] = pb * (dp[nt][2 + e] - dlb);
      }
    }
#pragma unroll
    for (int kc = 0; kc < 4; ++kc) {
      uint32_t a[4];
      acc_to_a(a, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
      for (int dpi = 0; dpi < D / 16; ++dpi) {
        uint32_t b[4];
        ldsm_x4_t(b, bt_addr(Ks, S, dpi * 16, kc * 16, lane));
        mma(acc[2 * dpi], a, b[0], b[1]);
        mma(acc[2 * dpi + 1], a, b[2], b[3]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    const int col = i * 8 + 2 * tq;
    if (ta < T)
      *reinterpret_cast<__nv_bfloat162*>(dq + (ta * NH + h) * D + col) =
          __floats2bfloat162_rn(acc[i][0] * scale, acc[i][1] * scale);
    if (tb < T)
      *reinterpret_cast<__nv_bfloat162*>(dq + (tb * NH + h) * D + col) =
          __floats2bfloat162_rn(acc[i][2] * scale, acc[i][3] * scale);
  }
}

// ---------------------------------------------------------------- dK, dV
// Block = 64 keys of one kv head, 4 warps × 16 keys; steps over the group's query heads and the
// query rows that can see these keys (up to the end of the last key's sample), kBq rows a step.
// Scores are computed transposed (Sᵀ = K·Qᵀ) so that Pᵀ and dSᵀ land in registers as the A
// operands of dV += Pᵀ·dO and dK += dSᵀ·Q.
template <int D>
__global__ void __launch_bounds__(128)
    attn_dkv_kernel(bf16* __restrict__ dk, bf16* __restrict__ dv, const bf16* __restrict__ dout,
                    const bf16* __restrict__ q, const bf16* __restrict__ k,
                    const bf16* __restrict__ v, const float* __restrict__ lse,
                    const float* __restrict__ delta, const int32_t* __restrict__ cu, int nseq,
                    int64_t T, int NH, int NKV, float scale, float scale_log2) {
  using C = Cfg<D>;
  constexpr int S = C::kS, BQ = C::kBq, NT = BQ / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* Ks = reinterpret_cast<bf16*>(smem_raw);
  bf16* Vs = Ks + 64 * S;
  bf16* Qs = Vs + 64 * S;
  bf16* Os = Qs + BQ * S;
  __shared__ int qstart[BQ];
  __shared__ float qlse[BQ], qdelta[BQ];

  const int g_kv = blockIdx.y, group = NH / NKV;
  const int64_t j0 = int64_t(blockIdx.x) * 64;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  load_tile<64, D, S, 128>(Ks, k, j0, T, NKV, g_kv);
  load_tile<64, D, S, 128>(Vs, v, j0, T, NKV, g_kv);
  const int64_t ja = j0 + warp * 16 + g, jb = ja + 8;  // this thread's two key rows
  const int64_t j_last = std::min<int64_t>(j0 + 63, T - 1);
  const int64_t q_end = cu[seq_index(cu, nseq, j_last) + 1];

  float ak[D / 8][4], av[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i)
    ak[i][0] = ak[i][1] = ak[i][2] = ak[i][3] = av[i][0] = av[i][1] = av[i][2] = av[i][3] = 0.0f;

  for (int h = g_kv * group; h < (g_kv + 1) * group; ++h) {
    for (int64_t q0 = j0; q0 < q_end; q0 += BQ) {
      __syncthreads();
      load_tile<BQ, D, S, 128>(Qs, q, q0, T, NH, h);
      load_tile<BQ, D, S, 128>(Os, dout, q0, T, NH, h);
      if (threadIdx.x < BQ) {
        const int64_t t = q0 + threadIdx.x;
        const bool ok = t < T;
        qstart[threadIdx.x] = ok ? cu[seq_index(cu, nseq, t)] : INT32_MAX;
        qlse[threadIdx.x] = ok ? lse[t * NH + h] * kLog2e : 0.0f;
        qdelta[threadIdx.x] = ok ? delta[t * NH + h] : 0.0f;
      }
      __syncthreads();
      float s[NT][4], dp[NT][4];
#pragma unroll
      for (int i = 0; i < NT; ++i)
        s[i][0] = s[i][1] = s[i][2] = s[i][3] = dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t akf[4], avf[4];
        ldsm_x4(akf, a_addr(Ks, S, warp * 16, kk * 16, lane));
        ldsm_x4(avf, a_addr(Vs, S, warp * 16, kk * 16, lane));
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
          uint32_t b[4];
          ldsm_x4(b, b_addr(Qs, S, np * 16, kk * 16, lane));
          mma(s[2 * np], akf, b[0], b[1]);
          mma(s[2 * np + 1], akf, b[2], b[3]);
          ldsm_x4(b, b_addr(Os, S, np * 16, kk * 16, lane));
          mma(dp[2 * np], avf, b[0], b[1]);
          mma(dp[2 * np + 1], avf, b[2], b[3]);
        }
      }
      // s → Pᵀ, dp → dSᵀ
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = nt * 8 + 2 * tq + e;
          const int64_t t = q0 + c;
          const int st = qstart[c];
          const float ls = qlse[c], dl = qdelta[c];
          const float pa = (ja >= st && ja <= t) ? exp2f(s[nt][e] * scale_log2 - ls) : 0.0f;
          const float pb = (jb >= st && jb <= t) ? exp2f(s[nt][2 + e] * scale_log2 - ls) : 0.0f;
          s[nt][e] = pa;
          s[nt][2 + e] = pb;
          dp[nt][e] = pa * (dp[nt][e] - dl);
          dp[nt][2 + e] = pb * (dp[nt][2 + e] - dl);
        }
      }
#pragma unroll
      for (int kc = 0; kc < NT / 2; ++kc) {
        uint32_t ap[4], ads[4];
        acc_to_a(ap, s[2 * kc], s[2 * kc + 1]);
        acc_to_a(ads, dp[2 * kc], dp[2 * kc + 1]);
#pragma unroll
        for (int dpi = 0; dpi < D / 16; ++dpi) {
          uint32_t b[4];
          ldsm_x4_t(b, bt_addr(Os, S, dpi * 16, kc * 16, lane));
          mma(av[2 * dpi], ap, b[0], b[1]);
          mma(av[2 * dpi + 1], ap, b[2], b[3]);
          ldsm_x4_t(b, bt_addr(Qs, S, dpi * 16, kc * 16, lane));
          mma(ak[2 * dpi], ads, b[0], b[1]);
          mma(ak[2 * dpi + 1], ads, b[2], b[3]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < D / 8; ++i) {
    const int col = i * 8 + 2 * tq;
    if (ja < T) {
      *reinterpret_cast<__nv_bfloat162*>(dk + (ja * NKV + g_kv) * D + col) =
          __floats2bfloat162_rn(ak[i][0] * scale, ak[i][1] * scale);
      *reinterpret_cast<__nv_bfloat162*>(dv + (ja * NKV + g_kv) * D + col) =
          __floats2bfloat162_rn(av[i][0], av[i][1]);
    }
    if (jb < T) {
      *reinterpret_cast<__nv_bfloat162*>(dk + (jb * NKV + g_kv) * D + col) =
          __floats2bfloat162_rn(ak[i][2] * scale, ak[i][3] * scale);
      *reinterpret_cast<__nv_bfloat162*>(dv + (jb * NKV + g_kv) * D + col) =
          __floats2bfloat162_rn(av[i][2], av[i][3]);
    }
  }
}

__global__ void attn_dq_generic(bf16* dq, const bf16* dout, const bf16* q, const bf16* k,
                                const bf16* v, const float* lse, const float* delta,
                                const int32_t* cu, int nseq, int64_t T, int NH, int NKV, int D,
                                float scale) {
  const int64_t task = int64_t(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (task >= T * NH) return;
  const int64_t t = task / NH;
  const int h = int(task % NH), gk = h / (NH / NKV);
  const int64_t j0 = cu[seq_index(cu, nseq, t)];
  float qr[kGenMax], gr[kGenMax], acc[kGenMax];
#pragma unroll
  for (int i = 0; i < kGenMax; ++i) {
    const int d = lane + 32 * i;
    qr[i] = d < D ? __bfloat162float(q[task * D + d]) : 0.0f;
    gr[i] = d < D ? __bfloat162float(dout[task * D + d]) : 0.0f;
    acc[i] = 0.0f;
  }
  const float ls = lse[task], dl = delta[task];
  for (int64_t j = j0; j <= t; ++j) {
    const bf16 *kr = k + (j * NKV + gk) * D, *vr = v + (j * NKV + gk) * D;
    float s = 0.0f, dp = 0.0f;
#pragma unroll
    for (int i = 0; i < kGenMax; ++i) {
      const int d = lane + 32 * i;
      if (d < D) {
        s += qr[i] * __bfloat162float(kr[d]);
        dp += gr[i] * __bfloat162float(vr[d]);
      }
    }
    s = warp_sum(s);
    dp = warp_sum(dp);
    const float ds = __expf(s * scale - ls) * (dp - dl);
#pragma unroll
    for (int i = 0; i < kGenMax; ++i) {
      const int d = lane + 32 * i;
      if (d < D) acc[i] += ds * __bfloat162float(kr[d]);
    }
  }
#pragma unroll
  for (int i = 0; i < kGenMax; ++i) {
    const int d = lane + 32 * i;
    if (d < D) dq[task * D + d] = __float2bfloat16(acc[i] * scale);
  }
}

__global__ void attn_dkv_generic(bf16* dk, bf16* dv, const bf16* dout, const bf16* q, const bf16* k,
                                 const bf16* v, const float* lse, const float* delta,
                                 const int32_t* cu, int nseq, int64_t T, int NH, int NKV, int D,
                                 float scale) {
  const int64_t task = int64_t(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (task >= T * NKV) return;
  const int64_t j = task / NKV;
  const int gk = int(task % NKV), group = NH / NKV;
  const int64_t end = cu[seq_index(cu, nseq, j) + 1];
  float kr[kGenMax], vr[kGenMax], ak[kGenMax], av[kGenMax];
#pragma unroll
  for (int i = 0; i < kGenMax; ++i) {
    const int d = lane + 32 * i;
    kr[i] = d < D ? __bfloat162float(k[task * D + d]) : 0.0f;
    vr[i] = d < D ? __bfloat162float(v[task * D + d]) : 0.0f;
    ak[i] = av[i] = 0.0f;
  }
  for (int h = gk * group; h < (gk + 1) * group; ++h) {
    for (int64_t t = j; t < end; ++t) {
      const int64_t row = t * NH + h;
      const bf16 *qr = q + row * D, *gr = dout + row * D;
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int i = 0; i < kGenMax; ++i) {
        const int d = lane + 32 * i;
        if (d < D) {
          s += kr[i] * __bfloat162float(qr[d]);
          dp += vr[i] * __bfloat162float(gr[d]);
        }
      }
      s = warp_sum(s);
      dp = warp_sum(dp);
      const float p = __expf(s * scale - lse[row]);
      const float ds = p * (dp - delta[row]);
#pragma unroll
      for (int i = 0; i < kGenMax; ++i) {
        const int d = lane + 32 * i;
        if (d < D) {
          ak[i] += ds * __bfloat162float(qr[d]);
          av[i] += p * __bfloat162float(gr[d]);
        }
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kGenMax; ++i) {
    const int d = lane + 32 * i;
    if (d < D) {
      dk[task * D + d] = __float2bfloat16(ak[i] * scale);
      dv[task * D + d] = __float2bfloat16(av[i]);
    }
  }
}

template <int D>
void bwd_mma(const Shape& s, Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k,
             Tensor v, Tensor lse, Tensor cu, const float* delta, float scale, cudaStream_t st) {
  const size_t smem_q = 4 * Cfg<D>::kTile;
  set_smem<D>(attn_dq_kernel<D>, smem_q);
  attn_dq_kernel<D><<<dim3(unsigned((s.T + 63) / 64), unsigned(s.NH)), 128, smem_q, st>>>(
      dq.as<bf16>(), dout.as<bf16>(), q.as<bf16>(), k.as<bf16>(), v.as<bf16>(), lse.f32(), delta,
      cu.i32(), s.nseq, s.T, s.NH, s.NKV, scale, scale * kLog2e);
  SF_LAUNCH_CHECK("attention_backward (dQ) q [", s.T, ",", s.NH, ",", s.D, "]");
  const size_t smem_kv = 2 * Cfg<D>::kTile + 2 * size_t(Cfg<D>::kBq) * Cfg<D>::kS * sizeof(bf16);
  set_smem<D>(attn_dkv_kernel<D>, smem_kv);
  attn_dkv_kernel<D><<<dim3(unsigned((s.T + 63) / 64), unsigned(s.NKV)), 128, smem_kv, st>>>(
      dk.as<bf16>(), dv.as<bf16>(), dout.as<bf16>(), q.as<bf16>(), k.as<bf16>(), v.as<bf16>(),
      lse.f32(), delta, cu.i32(), s.nseq, s.T, s.NH, s.NKV, scale, scale * kLog2e);
}

}  // namespace

void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k, Tensor v,
                        Tensor out, Tensor lse, Tensor cu_seqlens, float scale, float* delta,
                        int64_t delta_capacity, cudaStream_t stream) {
  const char* op = "attention_backward";
  const Shape s = check_shapes(op, out, lse, q, k, v, cu_seqlens);
  for (auto [name, t, like] :
       {std::tuple{"dq", &dq, &q}, {"dk", &dk, &k}, {"dv", &dv, &v}, {"dout", &dout, &q}}) {
    check_dtype(op, name, *t, DType::kBF16);
    SF_CHECK(t->numel() == like->numel() && t->cols() == s.D, op, ": ", name, " ", t->shape_str(),
             " must be shaped like ", like->shape_str());
  }
  if (s.T == 0) return;
  SF_CHECK(s.D <= 32 * kGenMax, op, ": head_dim ", s.D, " > ", 32 * kGenMax, " is not supported");
  SF_CHECK(s.T * s.NH <= delta_capacity, op, ": T·NH = ", s.T * s.NH,
           " exceeds the backend's attention workspace of ", delta_capacity,
           " floats: raise CudaBackendOptions::max_tokens or max_heads");
  attn_delta_kernel<<<grid_for(s.T * s.NH, 8), 256, 0, stream>>>(delta, dout.as<bf16>(),
                                                                 out.as<bf16>(), s.T * s.NH, s.D);
  SF_LAUNCH_CHECK(op, " (Δ) out ", out.shape_str());
  if (use_mma(s.D) && aligned16({dq.data, dk.data, dv.data, dout.data, q.data, k.data, v.data})) {
    switch (s.D) {
      case 16:
        bwd_mma<16>(s, dq, dk, dv, dout, q, k, v, lse, cu_seqlens, delta, scale, stream);
        break;
      case 32:
        bwd_mma<32>(s, dq, dk, dv, dout, q, k, v, lse, cu_seqlens, delta, scale, stream);
        break;
      case 64:
        bwd_mma<64>(s, dq, dk, dv, dout, q, k, v, lse, cu_seqlens, delta, scale, stream);
        break;
      default:
        bwd_mma<128>(s, dq, dk, dv, dout, q, k, v, lse, cu_seqlens, delta, scale, stream);
        break;
    }
  } else {
    attn_dq_generic<<<grid_for(s.T * s.NH, 4), 128, 0, stream>>>(
        dq.as<bf16>(), dout.as<bf16>(), q.as<bf16>(), k.as<bf16>(), v.as<bf16>(), lse.f32(), delta,
        cu_seqlens.i32(), s.nseq, s.T, s.NH, s.NKV, s.D, scale);
    SF_LAUNCH_CHECK(op, " (dQ) q ", q.shape_str());
    attn_dkv_generic<<<grid_for(s.T * s.NKV, 4), 128, 0, stream>>>(
        dk.as<bf16>(), dv.as<bf16>(), dout.as<bf16>(), q.as<bf16>(), k.as<bf16>(), v.as<bf16>(),
        lse.f32(), delta, cu_seqlens.i32(), s.nseq, s.T, s.NH, s.NKV, s.D, scale);
  }
  SF_LAUNCH_CHECK(op, " (dK/dV) q ", q.shape_str(), " k ", k.shape_str());
}

}  // namespace sf::cuda
