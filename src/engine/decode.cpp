#include "engine/decode.h"

#include <algorithm>
#include <cstring>

#include "core/dtype.h"
#include "core/host_memory.h"
#include "engine/decode_layer.h"
#include "model/layer.h"
#include "model/layout.h"
#include "model/rope.h"

namespace sf {
namespace {

// Device memory left to the CUDA libraries beyond what the decoder takes: cuBLASLt's and cuDNN's
// plans and workspaces grow after the backend exists, and a full device fails their allocations
// rather than ours.
constexpr uint64_t kDeviceHeadroom = uint64_t(512) << 20;

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

// Everything the decoder places on the device, in bytes, from the spec and the options.
struct DecodeSizes {
  size_t outer = 0, layer = 0, layers = 0, cache = 0, fixed = 0;
  size_t resident() const { return fixed + layers; }
  size_t ring(int slots) const { return fixed + size_t(slots) * layer; }
};

DecodeSizes decode_sizes(const ModelSpec& m, const DecoderOptions& o, DType dt) {
  const size_t dsz = dtype_size(dt);
  const int64_t chunk = o.prefill_chunk, rows = o.all_logits ? chunk : 1;
  DecodeSizes z;
  z.outer = align256(size_t(outer_layout(m).numel) * dsz);
  for (int64_t i = 0; i < m.layers; ++i) {
    const size_t b = align256(size_t(layer_layout(m, i).numel) * dsz);
    z.layer = std::max(z.layer, b);
    z.layers += b;
  }
  z.cache = size_t(m.layers) * 2 * align256(size_t(o.max_tokens * m.kv_heads * m.head_dim) * dsz);
  size_t io = 2 * align256(size_t(chunk * m.hidden) * dsz);  // x, y of a pass
  io += 3 * align256(size_t(chunk + 2) * 4);                 // ids, positions, cu_seqlens
  io += align256(size_t(m.head_dim / 2) * 4);                // inv_freq
  io += align256(size_t(rows * m.hidden) * dsz) + align256(size_t(rows) * 4);  // head norm, rstd
  io += align256(size_t(rows * m.vocab) * dsz);                                // logits
  if (dt != DType::kF32) io += align256(size_t(rows * m.vocab) * 4);           // as F32
  z.fixed = z.outer + z.cache + io + align256(DecodeWorkspace::bytes_needed(m, chunk, dt));
  return z;
}

// Takes consecutive 256-byte aligned pieces of one buffer.
struct Carve {
  char* p;
  void* take(size_t bytes) {
    void* r = p;
    p += align256(bytes);
    return r;
  }
  Tensor tensor(DType dt, std::initializer_list<int64_t> dims) {
    Tensor t(nullptr, dt, dims);
    t.data = take(t.bytes());
    return t;
  }
};

// fp32 values to the compute dtype, on the host: bf16 rounds to nearest even, as the device's
// convert does (the training engine casts its fp32 uploads there: the same bits).
void to_compute(const float* src, int64_t n, DType dt, void* dst) {
  if (dt == DType::kF32) {
    std::memcpy(dst, src, size_t(n) * 4);
    return;
  }
  SF_CHECK(dt == DType::kBF16, "decoder: compute dtype ", dtype_name(dt), " is not supported");
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
}

}  // namespace

struct Decoder::Device {
  std::vector<UnitLayout> layouts;  // of each layer
  void* outer = nullptr;
  OuterParams outer_p;
  std::vector<void*> layer;  // each layer's range (resident) or each ring slot's (streaming)
  std::vector<LayerCache> cache;
  void* work = nullptr;
  Tensor x[2], ids, positions, cu, inv_freq, xn, rstd, logits, logits_f32;
  int32_t *h_ids = nullptr, *h_positions = nullptr, *h_cu = nullptr;
  float* h_logits = nullptr;
};

Decoder::Decoder(Backend& backend, ModelSpec spec, DecoderOptions options, const WeightFill& fill)
    : be_(backend), spec_(std::move(spec)), opt_(options), dt_(backend.compute_dtype()) {
  const ModelSpec& m = spec_;
  SF_CHECK(opt_.max_tokens >= 1, "decoder: max_tokens must be at least 1, got ", opt_.max_tokens);
  SF_CHECK(opt_.prefill_chunk >= 1, "decoder: prefill_chunk must be at least 1");
  SF_CHECK(opt_.ring >= 1, "decoder: ring must be at least 1 slot");
  opt_.prefill_chunk = std::min(opt_.prefill_chunk, opt_.max_tokens);
  SF_CHECK(!m.sliding_window || opt_.max_tokens <= *m.sliding_window, "the model uses a sliding ",
           "window of ", m.sliding_window.value_or(0), " tokens, which the decoder does not ",
           "implement: keep the prompt and --max-new-tokens within ", m.sliding_window.value_or(0),
           " tokens (asked for ", opt_.max_tokens, ")");
  const DecodeSizes z = decode_sizes(m, opt_, dt_);

  // Resident when everything fits what the device has free, else the layers stream.
  const DeviceMemoryInfo info = be_.device_memory();
  uint64_t budget = opt_.device_budget;
  std::string where = "the budget given";
  if (budget == 0 && info.total > 0) {
    const uint64_t free = info.total - info.used;
    budget = free > kDeviceHeadroom ? free - kDeviceHeadroom : 0;
    where = str_cat(gib(free), " free on the device less ", gib(kDeviceHeadroom), " of headroom");
  }
  const int ring = int(std::min<int64_t>(opt_.ring, m.layers));
  streaming_ = budget > 0 && z.resident() > budget;
  const size_t need = streaming_ ? z.ring(ring) : z.resident();
  SF_CHECK(budget == 0 || need <= budget, "decoder: ", gib(need), " of device memory needed even ",
           "with the layers streaming through ", ring, " slots (embedding and head ", gib(z.outer),
           ", KV cache ", gib(z.cache), " for ", opt_.max_tokens, " tokens), but ", where, " is ",
           gib(budget), ": shorten the prompt or --max-new-tokens, or free device memory");
  if (streaming_) {
    summary_ = str_cat("decode on ", be_.name(), ": the ", m.layers, " layers (", gib(z.layers),
                       ") do not fit beside the embedding and head (", gib(z.outer),
                       ") and the KV cache (", gib(z.cache), ") in ", where, " (", gib(budget),
                       "): they stream from host memory through ", ring,
                       " device slots for every pass (correct, slower)");
  } else {
    summary_ =
        str_cat("decode on ", be_.name(), ": all ", m.layers, " layers resident (", gib(z.layers),
                "), KV cache ", gib(z.cache), " for ", opt_.max_tokens, " tokens");
  }

  dev_ = be_.alloc(MemoryKind::kDevice, need, "decoder weights, KV cache and workspaces");
  d_ = std::make_unique<Device>();
  Device& d = *d_;
  Carve c{static_cast<char*>(dev_.data())};
  const size_t dsz = dtype_size(dt_);
  const int64_t chunk = opt_.prefill_chunk, rows = opt_.all_logits ? chunk : 1;
  for (int64_t i = 0; i < m.layers; ++i) d.layouts.push_back(layer_layout(m, i));
  for (const UnitLayout& l : d.layouts) layer_numel_ = std::max(layer_numel_, l.numel);
  d.outer = c.take(z.outer);
  d.outer_p = OuterParams::view(m, outer_layout(m), d.outer, dt_);
  for (int64_t i = 0; i < m.layers; ++i)
    d.cache.push_back({c.tensor(dt_, {opt_.max_tokens, m.kv_heads, m.head_dim}),
                       c.tensor(dt_, {opt_.max_tokens, m.kv_heads, m.head_dim})});
  d.work = c.take(DecodeWorkspace::bytes_needed(m, chunk, dt_));
  d.x[0] = c.tensor(dt_, {chunk, m.hidden});
  d.x[1] = c.tensor(dt_, {chunk, m.hidden});
  d.ids = c.tensor(DType::kI32, {chunk + 2});
  d.positions = c.tensor(DType::kI32, {chunk + 2});
  d.cu = c.tensor(DType::kI32, {chunk + 2});
  d.inv_freq = c.tensor(DType::kF32, {m.head_dim / 2});
  d.xn = c.tensor(dt_, {rows, m.hidden});
  d.rstd = c.tensor(DType::kF32, {rows});
  d.logits = c.tensor(dt_, {rows, m.vocab});
  if (dt_ != DType::kF32) d.logits_f32 = c.tensor(DType::kF32, {rows, m.vocab});
  const size_t n_layer_ranges = streaming_ ? size_t(ring) : size_t(m.layers);
  for (size_t i = 0; i < n_layer_ranges; ++i)
    d.layer.push_back(c.take(size_t(streaming_ ? layer_numel_ : d.layouts[i].numel) * dsz));

  // Pinned host memory for what goes up and comes back each pass (the copies are asynchronous).
  host_io_ = be_.alloc(MemoryKind::kPinnedHost,
                       3 * align256(size_t(chunk + 2) * 4) + align256(size_t(rows * m.vocab) * 4),
                       "decoder token ids and logits");
  Carve h{static_cast<char*>(host_io_.data())};
  d.h_ids = static_cast<int32_t*>(h.take(size_t(chunk + 2) * 4));
  d.h_positions = static_cast<int32_t*>(h.take(size_t(chunk + 2) * 4));
  d.h_cu = static_cast<int32_t*>(h.take(size_t(chunk + 2) * 4));
  d.h_logits = static_cast<float*>(h.take(size_t(rows * m.vocab) * 4));

  compute_ = be_.create_stream("decode");
  h2d_ = be_.create_stream("decode-h2d");
  for (int i = 0; i < ring; ++i) {
    loaded_.push_back(be_.create_event());
    slot_free_.push_back(be_.create_event());
  }
  const std::vector<float> inv = rope_inv_freq(m);
  be_.copy(d.inv_freq.data, inv.data(), inv.size() * 4, *compute_);
  be_.synchronize(*compute_);
  load_weights(fill);
}

uint64_t Decoder::device_bytes(const ModelSpec& spec, const DecoderOptions& options, DType dt,
                               bool streaming) {
  DecoderOptions o = options;
  o.prefill_chunk = std::min(o.prefill_chunk, o.max_tokens);
  const DecodeSizes z = decode_sizes(spec, o, dt);
  return streaming ? z.ring(int(std::min<int64_t>(o.ring, spec.layers))) : z.resident();
}

Decoder::~Decoder() {
  if (compute_) be_.synchronize(*compute_);
  if (h2d_) be_.synchronize(*h2d_);
}

void Decoder::load_weights(const WeightFill& fill) {
  Device& d = *d_;
  const size_t dsz = dtype_size(dt_);
  const UnitLayout outer = outer_layout(spec_);
  if (streaming_) {
    size_t total = 0;
    for (const UnitLayout& l : d.layouts) total += size_t(l.numel) * dsz;
    host_layers_ = be_.alloc(MemoryKind::kPinnedHost, total, "decoder layers (streamed)");
  }
  std::vector<float> f32(size_t(std::max(outer.numel, layer_numel_)));
  std::vector<char> staged(f32.size() * dsz);
  char* host_layer = static_cast<char*>(host_layers_.data());
  // unit -1 is the outer one
  for (int64_t u = -1; u < spec_.layers; ++u) {
    const UnitLayout& l = u < 0 ? outer : d.layouts[size_t(u)];
    std::fill(f32.begin(), f32.begin() + l.numel, 0.0f);  // padding between tensors
    for (const auto& e : l.entries) fill(e.desc, f32.data() + e.offset);
    const size_t bytes = size_t(l.numel) * dsz;
    if (u >= 0 && streaming_) {
      to_compute(f32.data(), l.numel, dt_, host_layer);
      host_layer += bytes;
      continue;
    }
    to_compute(f32.data(), l.numel, dt_, staged.data());
    be_.copy(u < 0 ? d.outer : d.layer[size_t(u)], staged.data(), bytes, *compute_);
    be_.synchronize(*compute_);  // `staged` is reused for the next unit
  }
}

void Decoder::issue_load(int layer) {
  const size_t slot = size_t(layer) % d_->layer.size(), dsz = dtype_size(dt_);
  size_t offset = 0;
  for (int i = 0; i < layer; ++i) offset += size_t(d_->layouts[size_t(i)].numel) * dsz;
  be_.wait(*h2d_, *slot_free_[slot]);  // the layer that used the slot has run
  be_.copy(d_->layer[slot], static_cast<char*>(host_layers_.data()) + offset,
           size_t(d_->layouts[size_t(layer)].numel) * dsz, *h2d_);
  be_.record(*loaded_[slot], *h2d_);
}

void Decoder::run_layers(int64_t T) {
  Device& d = *d_;
  const int L = int(spec_.layers), R = int(d.layer.size());
  if (streaming_)
    for (int i = 0; i < std::min(R, L); ++i) issue_load(i);
  DecodeInputs in;
  in.past = length_;
  in.tokens = T;
  in.positions = Tensor(d.positions.data, DType::kI32, {T});
  in.cu_seqlens = Tensor(d.cu.data, DType::kI32, {2});
  in.inv_freq = d.inv_freq;
  DecodeWorkspace ws = DecodeWorkspace::carve(spec_, T, dt_, d.work);
  for (int i = 0; i < L; ++i) {
    const size_t slot = streaming_ ? size_t(i % R) : size_t(i);
    if (streaming_) be_.wait(*compute_, *loaded_[slot]);
    const LayerParams p = LayerParams::view(d.layouts[size_t(i)], d.layer[slot], dt_);
    const Tensor x(d.x[i % 2].data, dt_, {T, spec_.hidden}),
        y(d.x[(i + 1) % 2].data, dt_, {T, spec_.hidden});
    decode_layer_forward(be_, spec_, p, in, ws, d.cache[size_t(i)], x, y, *compute_);
    if (streaming_) {
      be_.record(*slot_free_[slot], *compute_);
      if (i + R < L) issue_load(i + R);
    }
  }
}

void Decoder::pass(const int32_t* ids, int64_t T, bool logits, bool all_rows, float* out) {
  Device& d = *d_;
  const int64_t C = spec_.hidden, V = spec_.vocab;
  std::copy(ids, ids + T, d.h_ids);
  for (int64_t t = 0; t < T; ++t) d.h_positions[t] = int32_t(length_ + t);
  d.h_cu[0] = 0;
  d.h_cu[1] = int32_t(T);
  be_.copy(d.ids.data, d.h_ids, size_t(T) * 4, *compute_);
  be_.copy(d.positions.data, d.h_positions, size_t(T) * 4, *compute_);
  be_.copy(d.cu.data, d.h_cu, 8, *compute_);
  const Tensor cu(d.cu.data, DType::kI32, {2});
  be_.set_host_cu_seqlens(cu, {0, int32_t(T)});
  be_.embedding_forward(Tensor(d.x[0].data, dt_, {T, C}), Tensor(d.ids.data, DType::kI32, {T}),
                        d.outer_p.embed, *compute_);
  run_layers(T);
  if (logits) {
    // The last layer's output is in x[L % 2]; the head reads its last row, or every row.
    const int64_t rows = all_rows ? T : 1;
    const size_t dsz = dtype_size(dt_);
    const Tensor x(static_cast<char*>(d.x[spec_.layers % 2].data) + size_t((T - rows) * C) * dsz,
                   dt_, {rows, C});
    const Tensor xn(d.xn.data, dt_, {rows, C}), lg(d.logits.data, dt_, {rows, V});
    be_.rmsnorm_forward(xn, Tensor(d.rstd.data, DType::kF32, {rows}), x, d.outer_p.norm,
                        float(spec_.rms_norm_eps), *compute_);
    be_.linear_forward(lg, xn, d.outer_p.head, Tensor(), *compute_);
    const Tensor f32 = dt_ == DType::kF32 ? lg : Tensor(d.logits_f32.data, DType::kF32, {rows, V});
    if (dt_ != DType::kF32) be_.convert(f32, lg, *compute_);
    be_.copy(d.h_logits, f32.data, size_t(rows * V) * 4, *compute_);
    be_.synchronize(*compute_);
    std::copy(d.h_logits, d.h_logits + rows * V, out);
  } else {
    be_.synchronize(*compute_);  // the pinned ids and positions are rewritten by the next pass
  }
  length_ += T;
}

std::vector<float> Decoder::forward(const std::vector<int32_t>& ids, bool all_logits) {
  const int64_t n = int64_t(ids.size()), V = spec_.vocab;
  SF_CHECK(n >= 1, "decoder: no tokens to run");
  SF_CHECK(!all_logits || opt_.all_logits,
           "decoder: every row's logits were asked for, but DecoderOptions::all_logits is off");
  SF_CHECK(length_ + n <= opt_.max_tokens, "decoder: ", length_, " cached + ", n,
           " new tokens exceed the ", opt_.max_tokens, " the KV cache was made for");
  for (int64_t t = 0; t < n; ++t)
    SF_CHECK(ids[size_t(t)] >= 0 && ids[size_t(t)] < V, "decoder: token id ", ids[size_t(t)],
             " at position ", length_ + t, " is outside the vocabulary of ", V);
  std::vector<float> out(size_t(all_logits ? n * V : V));
  for (int64_t at = 0; at < n; at += opt_.prefill_chunk) {
    const int64_t T = std::min(opt_.prefill_chunk, n - at);
    const bool last = at + T == n;
    pass(ids.data() + at, T, all_logits || last, all_logits,
         all_logits ? out.data() + at * V : out.data());
  }
  return out;
}

}  // namespace sf
