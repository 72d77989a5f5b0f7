// defines: sf::cuda::embedding_forward, embedding_backward, embedding_scratch_bytes,
// embedding_scratch.
//
// The backward is deterministic — the same bits from run to run, whatever the timing — and needs
// no atomics on floats:
//  1. keys[t] = ids[t] (an id outside [0, V) becomes a key >= V and contributes nothing);
//  2. a stable radix sort of (key, t) on the bits the vocabulary needs: each id's tokens become
//     one contiguous run of the sorted order, in increasing token order. Up to kTileTokens (16384)
//     tokens and keys of <= 18 bits, steps 1 and 2 are one kernel of one block: each token packed
//     into one word, key << 14 | t, the words radix-sorted in shared memory on the key bits alone
//     (CUB BlockRadixSort, 3 passes of 6 bits). Otherwise a kernel makes keys and positions and
//     CUB's device-wide sort orders them (captured once into a CUDA graph over all max_tokens
//     entries: its ten memsets and kernels are one launch, but each still costs its latency);
//  3. one block per chunk of kChunk sorted positions and tile of columns. A chunk's bounds are
//     moved forward to the next run start when one lies within kChunk positions, so a run of at
//     most kChunk tokens always lies inside one chunk: its block sums it in token order and adds
//     the sum to the row once (dtable[id] += sum). A longer run is cut at the chunk bounds; each
//     chunk leaves its piece's sum in a partial slot, and the chunk where the run starts lists it;
//  4. one block per listed run and tile of columns adds the run's partial sums in a fixed order
//     (kFixLanes strided sums, then those in lane order) and adds the total to the row.
// Every row is written by one thread per column, once. A frequent id (padding, "the") costs no
// more than any other tokens: its pieces are spread over blocks like the rest.
//
// Measured (H200, 2026-12-02, bench_kernels, 16384 tokens × 4096 into vocab 128256, uniform ids;
// bench/kernels/h200_2026-12-02_embedding_tile_sort.log): 0.214 ms, 76.4% of the 0.164 ms floor —
// the one-block sort 0.027 ms, with the chunk sums 0.211 ms; half the tokens on one id: 0.151 ms,
// 62.4% of its 0.094 ms floor. Same run, the device-wide sort: 0.049 ms, whole backward 0.237 ms
// (69.2%). BlockRadixSort alone, back to back, 17 or 18 bits: 23.2 µs at 6 bits a pass, 23.8 µs
// at 5, 25.3 µs at 4. The fp32-atomics kernel this replaced ran 0.224 ms (73%) in an earlier run.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <memory>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernels.h"

namespace sf::cuda {
namespace {

constexpr int kPack = 8;            // bf16 per 16-byte access
constexpr int kChunk = 32;          // sorted positions a block, before moving its bounds
constexpr int kBatch = 4;           // rows whose loads a thread keeps in flight together
constexpr int kChunkThreads = 128;  // threads of a chunk block (kPack columns each)
constexpr int kFixLanes = 16;       // partial sums of one run read in parallel
constexpr int kFixGroups = 16;      // column groups of a run block (4 or 1 columns each)
constexpr int kFixThreads = kFixLanes * kFixGroups;
constexpr int kFixBlocksX = 8;            // listed runs summed at once
constexpr uint32_t kNoKey = 0xffffffffu;  // outside the sorted array; never a key (keys <= V)
static_assert(kChunk == 32, "a chunk's run starts are found with one warp ballot");

// The one-block sort: a tile of kSortThreads × kSortItems tokens, each packed into one word as
// key << kTokenBits | token, so keys of up to 32 − kTokenBits = 18 bits (vocab < 262144).
constexpr int kSortThreads = 1024;
constexpr int kSortItems = 16;     // consecutive tokens a thread
constexpr int kTokenBits = 14;     // low bits of a packed word: the token
constexpr int kSortRadixBits = 6;  // key bits a pass: 17 or 18 bits in 3 passes
constexpr int64_t kTileTokens = int64_t(kSortThreads) * kSortItems;
constexpr int kTileKeyBits = 32 - kTokenBits;
static_assert(kTileTokens == int64_t(1) << kTokenBits, "every token of a tile fits the low bits");
// Keys only (the token travels in the word): 16 registers of data a thread. Not memoizing the
// digit scan in registers keeps ptxas under 64 registers (1024 threads) with no spills.
using TileSort = cub::BlockRadixSort<uint32_t, kSortThreads, kSortItems, cub::NullType,
                                     kSortRadixBits, /*MEMOIZE_OUTER_SCAN=*/false>;
constexpr size_t kTileSortSmem = sizeof(TileSort::TempStorage);  // 135 KB: dynamic, opted in

// Raw<N>: N bf16 as loaded; dout is read once, so loads use the streaming hint.
template <int N>
struct Raw;
template <>
struct Raw<8> {
  uint4 u;
};
template <>
struct Raw<1> {
  unsigned short u;
};

template <int N>
__device__ __forceinline__ Raw<N> load_raw(const bf16* p) {
  if constexpr (N == 8)
    return {__ldcs(reinterpret_cast<const uint4*>(p))};
  else
    return {__ldcs(reinterpret_cast<const unsigned short*>(p))};
}

template <int N>
__device__ __forceinline__ void add_raw(float* acc, const Raw<N>& r) {
  if constexpr (N == 8) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r.u);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(h[i]);
      acc[2 * i] += f.x;
      acc[2 * i + 1] += f.y;
    }
  } else {
    acc[0] += __bfloat162float(__ushort_as_bfloat16(r.u));
  }
}

// N consecutive floats (N a multiple of 4: 16-byte accesses).
template <int N>
__device__ __forceinline__ void load_f32(float* v, const float* p) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 a = reinterpret_cast<const float4*>(p)[i];
      v[4 * i] = a.x, v[4 * i + 1] = a.y, v[4 * i + 2] = a.z, v[4 * i + 3] = a.w;
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = p[i];
  }
}

template <int N>
__device__ __forceinline__ void store_f32(float* p, const float* v) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i)
      reinterpret_cast<float4*>(p)[i] =
          make_float4(v[4 * i], v[4 * i + 1], v[4 * i + 2], v[4 * i + 3]);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = v[i];
  }
}

// ---- forward: one block per token, a row copy ----
__global__ void embedding_fwd_kernel(bf16* out, const int32_t* ids, const bf16* table, int64_t C,
                                     bool vec) {
  const int64_t t = blockIdx.x;
  const bf16* src = table + int64_t(ids[t]) * C;
  bf16* dst = out + t * C;
  if (vec) {
    for (int64_t c = threadIdx.x; c < C / kPack; c += blockDim.x)
      reinterpret_cast<uint4*>(dst)[c] = reinterpret_cast<const uint4*>(src)[c];
  } else {
    for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dst[c] = src[c];
  }
}

// ---- backward step 1: sort keys and positions for n >= T entries (entries past T, and ids
// outside [0, V), get the key `none` >= V: sorted last, they add nothing); empties the run list --
__global__ void embedding_bwd_keys_kernel(uint32_t* keys, int32_t* pos, int32_t* run_count,
                                          const int32_t* ids, int64_t T, int64_t n, uint32_t V,
                                          uint32_t none) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += stride) {
    const uint32_t id = t < T ? uint32_t(ids[t]) : none;  // a negative id becomes >= 2^31 > V
    keys[t] = id < V ? id : none;
    pos[t] = int32_t(t);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) *run_count = 0;
}

// ---- backward steps 1 and 2 in one block, for T <= kTileTokens and keys of <= kTileKeyBits bits:
// thread i packs tokens [16i, 16i + 16) as key << kTokenBits | t (the keys of step 1; entries past
// T get `none`) and the block radix-sorts the words on the key bits alone. Each LSD pass keeps the
// order of the last, and the first sees the tokens in order (thread by thread, item by item: the
// blocked arrangement), so equal keys stay in token order. The result goes out striped (coalesced
// stores), unpacked into the keys and positions the chunk kernel reads. ----
__global__ void __launch_bounds__(kSortThreads)
    embedding_bwd_tile_sort_kernel(uint32_t* __restrict__ keys, int32_t* __restrict__ pos,
                                   int32_t* __restrict__ run_count, const int32_t* __restrict__ ids,
                                   int T, uint32_t V, int bits) {
  extern __shared__ __align__(16) unsigned char smem[];
  TileSort::TempStorage& temp = *reinterpret_cast<TileSort::TempStorage*>(smem);
  const uint32_t none = (1u << bits) - 1;  // >= V, as bits = bit_width(V)
  uint32_t w[kSortItems];
  const int t0 = int(threadIdx.x) * kSortItems;
#pragma unroll
  for (int i = 0; i < kSortItems; ++i) {
    const int t = t0 + i;
    const uint32_t id = t < T ? uint32_t(__ldg(ids + t)) : none;  // negative ids: >= 2^31 > V
    w[i] = (id < V ? id : none) << kTokenBits | uint32_t(t);
  }
  if (threadIdx.x == 0) *run_count = 0;
  TileSort(temp).SortBlockedToStriped(w, kTokenBits, kTokenBits + bits);
#pragma unroll
  for (int i = 0; i < kSortItems; ++i) {
    const int r = i * kSortThreads + int(threadIdx.x);
    if (r < T) {
      keys[r] = w[i] >> kTokenBits;
      pos[r] = int32_t(w[i] & ((1u << kTokenBits) - 1));
    }
  }
}

// ---- backward step 3: block (chunk j, column tile). partial holds two rows of C floats a
// chunk: [2j] the piece of a run that started in an earlier chunk ("head"), [2j + 1] the piece
// of a run that starts here and goes on past the chunk ("tail"; the chunk lists that run). ----
template <int N>  // columns a thread: kPack, or 1 where C or the pointers forbid 16-byte access
__global__ void __launch_bounds__(kChunkThreads)
    embedding_bwd_chunks_kernel(float* __restrict__ dtable, float* __restrict__ partial,
                                int32_t* __restrict__ runs, int32_t* __restrict__ run_count,
                                const uint32_t* __restrict__ keys, const int32_t* __restrict__ pos,
                                const bf16* __restrict__ dout, int64_t T, int64_t C, uint32_t V) {
  __shared__ uint32_t key[2 * kChunk + 2];  // key[i]: sorted key at base − 1 + i (kNoKey outside)
  __shared__ int32_t row[2 * kChunk];       // row[i]: token at base + i, for i in [lo, hi)
  __shared__ int bound[2];
  const int64_t base = int64_t(blockIdx.x) * kChunk;
  for (int i = threadIdx.x; i < 2 * kChunk + 2; i += blockDim.x) {
    const int64_t p = base - 1 + i;
    key[i] = p >= 0 && p < T ? keys[p] : kNoKey;
  }
  __syncthreads();
  // The block's positions are base + [lo, hi): lo is the first run start in [0, kChunk) (0 if
  // none: inside a long run), hi the same for the next chunk — the next block finds the same.
  if (threadIdx.x < 32) {
    const int l = threadIdx.x;
    const unsigned a = __ballot_sync(0xffffffffu, key[1 + l] != key[l]);
    const unsigned b = __ballot_sync(0xffffffffu, key[kChunk + 1 + l] != key[kChunk + l]);
    if (l == 0) {
      bound[0] = a ? __ffs(int(a)) - 1 : 0;
      bound[1] = base + kChunk >= T ? int(T - base) : b ? kChunk + __ffs(int(b)) - 1 : kChunk;
    }
  }
  __syncthreads();
  const int lo = bound[0], hi = bound[1];
  for (int i = lo + int(threadIdx.x); i < hi; i += blockDim.x) row[i] = pos[base + i];
  const uint32_t before = key[lo];  // the key just before the block's first position
  if (blockIdx.y == 0 && threadIdx.x == 0 && hi > lo) {
    const uint32_t k = key[hi];  // the last run: does it start here and go on past hi?
    if (k < V && k != before && key[hi + 1] == k) runs[atomicAdd(run_count, 1)] = blockIdx.x;
  }
  __syncthreads();
  const int64_t c = (int64_t(blockIdx.y) * blockDim.x + threadIdx.x) * N;
  if (c >= C) return;

  float acc[N] = {};
  for (int i0 = lo; i0 < hi; i0 += kBatch) {
    // issue the batch's loads first: its dout rows, and the table rows of the runs that end in it
    Raw<N> d[kBatch];
    float old[kBatch][N];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = i0 + u;
      if (i < hi) {
        d[u] = load_raw<N>(dout + int64_t(row[i]) * C + c);
        const uint32_t k = key[1 + i];
        if (k < V && k != before && key[2 + i] != k)
          load_f32<N>(old[u], dtable + int64_t(k) * C + c);
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = i0 + u;
      if (i >= hi) break;
      const uint32_t k = key[1 + i];
      add_raw<N>(acc, d[u]);
      const bool ends = key[2 + i] != k;
      if (!ends && i + 1 < hi) continue;  // the run goes on within the block
      if (k < V) {
        if (k != before && ends) {  // the whole run is here: the row, once
#pragma unroll
          for (int e = 0; e < N; ++e) old[u][e] += acc[e];
          store_f32<N>(dtable + int64_t(k) * C + c, old[u]);
        } else {
          store_f32<N>(partial + (2 * int64_t(blockIdx.x) + (k == before ? 0 : 1)) * C + c, acc);
        }
      }
#pragma unroll
      for (int e = 0; e < N; ++e) acc[e] = 0.0f;
    }
  }
}

// ---- backward step 4: block (listed runs blockIdx.x, += gridDim.x; column tile). A listed run
// starts in chunk j and fills chunks j+1 .. j+h entirely up to the last position of each — but
// for the last, where it ends — so its pieces are tail[j], head[j+1], .., head[j+h]. ----
template <int N>  // columns a thread: 4 or 1
__global__ void __launch_bounds__(kFixThreads)
    embedding_bwd_runs_kernel(float* __restrict__ dtable, const float* __restrict__ partial,
                              const int32_t* __restrict__ runs,
                              const int32_t* __restrict__ run_count,
                              const uint32_t* __restrict__ keys, int64_t T, int64_t C) {
  __shared__ float part[kFixLanes][kFixGroups * N + 1];
  const int g = threadIdx.x, r = threadIdx.y, tid = r * kFixGroups + g;
  const int64_t c = (int64_t(blockIdx.y) * kFixGroups + g) * N;
  const int count = *run_count;
  for (int o = blockIdx.x; o < count; o += gridDim.x) {
    const int64_t j = runs[o];
    const uint32_t k = keys[(j + 1) * kChunk - 1];
    // h = chunks after j whose last position still holds k (the run is contiguous: they come
    // first), counted kFixThreads at a time
    int64_t h = 0;
    for (;;) {
      const int64_t last = (j + 2 + h + tid) * kChunk - 1;
      const int n = __syncthreads_count(last < T && keys[last] == k);
      h += n;
      if (n < kFixThreads) break;
    }
    float acc[N] = {};
    if (c < C) {
#pragma unroll 4
      for (int64_t p = r; p <= h; p += kFixLanes) {
        float v[N];
        load_f32<N>(v, partial + (p == 0 ? 2 * j + 1 : 2 * (j + p)) * C + c);
#pragma unroll
        for (int e = 0; e < N; ++e) acc[e] += v[e];
      }
    }
#pragma unroll
    for (int e = 0; e < N; ++e) part[r][g * N + e] = acc[e];
    __syncthreads();
    if (r == 0 && c < C) {
      float s[N], old[N];
#pragma unroll
      for (int e = 0; e < N; ++e) s[e] = part[0][g * N + e];
      for (int l = 1; l < kFixLanes; ++l)
#pragma unroll
        for (int e = 0; e < N; ++e) s[e] += part[l][g * N + e];
      float* dst = dtable + int64_t(k) * C + c;
      load_f32<N>(old, dst);
#pragma unroll
      for (int e = 0; e < N; ++e) old[e] += s[e];
      store_f32<N>(dst, old);
    }
    __syncthreads();  // part is reused by the next run
  }
}

int64_t chunks(int64_t T) { return (T + kChunk - 1) / kChunk; }

size_t round256(size_t n) { return (n + 255) / 256 * 256; }

// Radix-sort temporary bytes for T keys of `bits` bits (no device work).
size_t sort_temp_bytes(int64_t T, int bits, cudaStream_t stream) {
  cub::DoubleBuffer<uint32_t> k(nullptr, nullptr);
  cub::DoubleBuffer<int32_t> v(nullptr, nullptr);
  size_t bytes = 0;
  SF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, v, int(T), 0, bits, stream),
                "embedding_backward: radix sort size query for ", T, " keys of ", bits, " bits");
  return bytes;
}

// The sort of all max_tokens entries on `bits`-bit keys, captured once into a CUDA graph: one
// launch instead of CUB's ten memsets and kernels, each of which the host would otherwise issue
// within the op. Left empty when capture fails (the op then sorts directly).
void capture_sort(EmbeddingScratch* s, int bits) {
  cudaStream_t cs = nullptr;
  if (cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  cub::DoubleBuffer<uint32_t> keys(s->keys[0], s->keys[1]);
  cub::DoubleBuffer<int32_t> pos(s->pos[0], s->pos[1]);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamBeginCapture(cs, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    size_t have = s->sort_temp_bytes;
    const cudaError_t sorted = cub::DeviceRadixSort::SortPairs(s->sort_temp, have, keys, pos,
                                                               int(s->max_tokens), 0, bits, cs);
    if (cudaStreamEndCapture(cs, &graph) == cudaSuccess && sorted == cudaSuccess &&
        cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess) {
      s->sort_graph =
          std::shared_ptr<CUgraphExec_st>(exec, [](cudaGraphExec_t e) { cudaGraphExecDestroy(e); });
      s->graph_bits = bits;
      s->graph_keys = keys.Current();
      s->graph_pos = pos.Current();
    }
  }
  if (graph) cudaGraphDestroy(graph);
  cudaStreamDestroy(cs);
  cudaGetLastError();  // a failed capture is not an error of the next op
}

// The scratch's pieces at `base` (null: sizes only); returns the total bytes.
size_t carve(char* base, int64_t max_tokens, int64_t hidden, EmbeddingScratch* s) {
  const size_t T = size_t(max_tokens), nch = size_t(chunks(max_tokens));
  size_t off = 0;
  const auto take = [&](size_t bytes) {
    char* p = base ? base + off : nullptr;
    off += round256(bytes);
    return p;
  };
  for (int b = 0; b < 2; ++b) {
    s->keys[b] = reinterpret_cast<uint32_t*>(take(T * 4));
    s->pos[b] = reinterpret_cast<int32_t*>(take(T * 4));
  }
  s->runs = reinterpret_cast<int32_t*>(take(nch * 4));
  s->run_count = reinterpret_cast<int32_t*>(take(4));
  s->sort_temp_bytes = sort_temp_bytes(max_tokens, 32, nullptr);  // 32 bits: the most passes
  s->sort_temp = take(s->sort_temp_bytes);
  s->partial = reinterpret_cast<float*>(take(2 * nch * size_t(hidden) * 4));
  s->max_tokens = max_tokens;
  s->hidden = hidden;
  return off;
}

}  // namespace

size_t embedding_scratch_bytes(int64_t max_tokens, int64_t hidden) {
  EmbeddingScratch s;
  return carve(nullptr, max_tokens, hidden, &s);
}

EmbeddingScratch embedding_scratch(void* base, int64_t max_tokens, int64_t hidden, int64_t vocab) {
  EmbeddingScratch s;
  carve(static_cast<char*>(base), max_tokens, hidden, &s);
  if (vocab > 0 && vocab < (int64_t(1) << 31))
    capture_sort(&s, std::bit_width(uint64_t(vocab)));  // keys 0..2^bits − 1 >= vocab
  // the one-block sort's shared memory is past the 48 KB a launch gets unasked; a device that
  // cannot give it (below sm_80) sorts device-wide
  s.tile_sort = cudaFuncSetAttribute(embedding_bwd_tile_sort_kernel,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     int(kTileSortSmem)) == cudaSuccess;
  cudaGetLastError();
  return s;
}

void embedding_forward(Tensor out, Tensor ids, Tensor table, cudaStream_t stream) {
  check_dtype("embedding_forward", "out", out, DType::kBF16);
  check_dtype("embedding_forward", "table", table, DType::kBF16);
  check_dtype("embedding_forward", "ids", ids, DType::kI32);
  const int64_t T = ids.numel(), C = table.cols();
  SF_CHECK(table.ndim == 2 && out.rows() == T && out.cols() == C,
           "embedding_forward: shapes do not match out[T,C] = table[V,C][ids[T]]: out ",
           out.shape_str(), ", ids ", ids.shape_str(), ", table ", table.shape_str());
  if (T == 0) return;
  const bool vec = C % kPack == 0 && aligned16({out.data, table.data});
  embedding_fwd_kernel<<<unsigned(T), 128, 0, stream>>>(out.as<bf16>(), ids.i32(), table.as<bf16>(),
                                                        C, vec);
  SF_LAUNCH_CHECK("embedding_forward out ", out.shape_str(), " table ", table.shape_str());
}

void embedding_backward(Tensor dtable, Tensor ids, Tensor dout, const EmbeddingScratch& s,
                        cudaStream_t stream, int stages) {
  check_dtype("embedding_backward", "dtable", dtable, DType::kF32);
  check_dtype("embedding_backward", "dout", dout, DType::kBF16);
  check_dtype("embedding_backward", "ids", ids, DType::kI32);
  const int64_t T = ids.numel(), V = dtable.rows(), C = dtable.cols();
  SF_CHECK(dtable.ndim == 2 && dout.rows() == T && dout.cols() == C,
           "embedding_backward: shapes do not match dtable[V,C] += scatter(dout[T,C], ids[T]): ",
           "dtable ", dtable.shape_str(), ", ids ", ids.shape_str(), ", dout ", dout.shape_str());
  SF_CHECK(T <= s.max_tokens && C <= s.hidden && V < (int64_t(1) << 31),
           "embedding_backward: dtable ", dtable.shape_str(), ", ids ", ids.shape_str(),
           " exceed the scratch made for CudaBackendOptions max_tokens ", s.max_tokens,
           " and hidden ", s.hidden, " (and V must be < 2^31)");
  if (T == 0) return;
  const auto what = [&] {
    return str_cat("embedding_backward dtable ", dtable.shape_str(), " dout ", dout.shape_str());
  };
  const uint32_t* sorted_keys = s.keys[0];
  const int32_t* sorted_pos = s.pos[0];
  const int vbits = std::max(1, int(std::bit_width(uint64_t(V))));
  if (s.tile_sort && T <= kTileTokens && vbits <= kTileKeyBits) {
    embedding_bwd_tile_sort_kernel<<<1, kSortThreads, kTileSortSmem, stream>>>(
        s.keys[0], s.pos[0], s.run_count, ids.i32(), int(T), uint32_t(V), vbits);
    SF_LAUNCH_CHECK(what(), ": one-block sort of ", T, " keys of ", vbits, " bits, ", kTileSortSmem,
                    " bytes of shared memory");
  } else {
    // The captured sort of all max_tokens entries where V fits its keys, else a sort of T entries.
    const bool graph = s.sort_graph && std::bit_width(uint64_t(V)) <= s.graph_bits;
    const int bits = graph ? s.graph_bits : std::bit_width(uint64_t(V));
    const int64_t n = graph ? s.max_tokens : T;
    const uint32_t none = graph ? uint32_t((int64_t(1) << bits) - 1) : uint32_t(V);
    embedding_bwd_keys_kernel<<<grid_for(n, 256, 132 * 8), 256, 0, stream>>>(
        s.keys[0], s.pos[0], s.run_count, ids.i32(), T, n, uint32_t(V), none);
    SF_LAUNCH_CHECK(what(), ": keys");
    if (graph) {
      SF_CUDA_CHECK(cudaGraphLaunch(s.sort_graph.get(), stream), what(), ": radix sort of ", n,
                    " keys of ", bits, " bits (graph)");
      sorted_keys = s.graph_keys;
      sorted_pos = s.graph_pos;
    } else {
      cub::DoubleBuffer<uint32_t> keys(s.keys[0], s.keys[1]);
      cub::DoubleBuffer<int32_t> pos(s.pos[0], s.pos[1]);
      const size_t need = sort_temp_bytes(T, bits, stream);
      SF_CHECK(need <= s.sort_temp_bytes, what(), ": the radix sort needs ", need,
               " temporary bytes, the scratch has ", s.sort_temp_bytes);
      size_t have = s.sort_temp_bytes;
      SF_CUDA_CHECK(
          cub::DeviceRadixSort::SortPairs(s.sort_temp, have, keys, pos, int(T), 0, bits, stream),
          what(), ": radix sort of ", T, " keys of ", bits, " bits");
      sorted_keys = keys.Current();
      sorted_pos = pos.Current();
    }
  }
  if (stages < 2) return;

  const bool vec = C % kPack == 0 && aligned16({dtable.data, dout.data});
  const int64_t groups = vec ? C / kPack : C;  // threads a row
  const int threads = int(std::min<int64_t>(kChunkThreads, (groups + 31) / 32 * 32));
  const dim3 grid(unsigned(chunks(T)), unsigned((groups + threads - 1) / threads));
  if (vec)
    embedding_bwd_chunks_kernel<kPack>
        <<<grid, threads, 0, stream>>>(dtable.f32(), s.partial, s.runs, s.run_count, sorted_keys,
                                       sorted_pos, dout.as<bf16>(), T, C, uint32_t(V));
  else
    embedding_bwd_chunks_kernel<1>
        <<<grid, threads, 0, stream>>>(dtable.f32(), s.partial, s.runs, s.run_count, sorted_keys,
                                       sorted_pos, dout.as<bf16>(), T, C, uint32_t(V));
  SF_LAUNCH_CHECK(what(), ": chunk sums, grid ", grid.x, "x", grid.y);
  if (stages < 3) return;

  const int fix_cols = vec ? 4 : 1;
  const dim3 fix_grid(unsigned(std::min<int64_t>(kFixBlocksX, chunks(T))),
                      unsigned((C + kFixGroups * fix_cols - 1) / (kFixGroups * fix_cols)));
  const dim3 fix_block(kFixGroups, kFixLanes);
  if (vec)
    embedding_bwd_runs_kernel<4><<<fix_grid, fix_block, 0, stream>>>(
        dtable.f32(), s.partial, s.runs, s.run_count, sorted_keys, T, C);
  else
    embedding_bwd_runs_kernel<1><<<fix_grid, fix_block, 0, stream>>>(
        dtable.f32(), s.partial, s.runs, s.run_count, sorted_keys, T, C);
  SF_LAUNCH_CHECK(what(), ": long runs, grid ", fix_grid.x, "x", fix_grid.y);
}

}  // namespace sf::cuda
