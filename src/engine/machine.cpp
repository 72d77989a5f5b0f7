#include "engine/machine.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/atomic_file.h"
#include "io/nvme_probe.h"
#include "model/layer.h"
#include "model/layout.h"
#include "model/rope.h"
#include "optim/adamw.h"

namespace sf {
namespace fs = std::filesystem;
namespace {

// The cache's format and how its constants are measured. 2 since the thread pool hands out chunks
// (2026-12-07): the CPU AdamW rates measured with static shares understate the engine's by up to a
// third, so a cache written before is measured again. 3: the clipped update's two passes' rates
// (adam_master_params_per_s, adam_moments_params_per_s). 4: the whole update's rate with Σ g²
// formed in the same pass, as the worker now updates a ring piece. 5: the layer timed after it
// ran back to back for seconds (ProbeSize::layer_hot_s): in a step the layer ran 4 % (forward)
// and 12 % (backward) slower than the cold probe had timed it (an H100, 2026-12-07).
constexpr int kCacheVersion = 5;

// A cache file's contents this version can use.
bool usable_cache(const nlohmann::json& all) {
  return all.is_object() && all.contains("version") && all["version"].is_number_integer() &&
         all["version"].get<int>() == kCacheVersion && all.contains("entries") &&
         all["entries"].is_object();
}

nlohmann::json empty_cache() {
  return nlohmann::json{{"version", kCacheVersion}, {"entries", nlohmann::json::object()}};
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

constexpr size_t kCopyBytes = size_t(64) << 20;  // the engine's upload tile: 16 Mi fp32
// CPU AdamW over 96 Mi parameters (1.3 GiB of state and gradient, pinned): far past any cache, as
// the engine's units are (the GPU machine's Xeon has 300 MiB of L3: at 32 Mi in pageable memory
// the probe's rate there was 1.6× what the engine reached); ~25 ms a pass there.
constexpr int64_t kAdamParams = int64_t(96) << 20;

// The median of `reps` timings of fn (seconds), after one untimed call.
template <typename F>
double median_time(int reps, F&& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(seconds_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double copy_gbps(Backend& be, void* dst, const void* src, Stream& s) {
  const int n = 8;
  const double t = median_time(3, [&] {
    for (int i = 0; i < n; ++i) be.copy(dst, src, kCopyBytes, s);
    be.synchronize(s);
  });
  return double(kCopyBytes) * n / t * 1e-9;
}

// Small values spread over [-0.02, 0.02], deterministic (the timing does not depend on them, but
// NaNs or denormals would).
void fill_small(std::vector<float>& x, uint64_t seed) {
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& v : x) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v = (float(s >> 40) / float(1 << 24) - 0.5f) * 0.04f;
  }
}

}  // namespace

LayerTimes time_layer(Backend& be, const ModelSpec& spec, int64_t M, int64_t S, double hot_s) {
  const DType dt = be.compute_dtype();
  const size_t dsz = dtype_size(dt);
  const UnitLayout lay = layer_layout(spec, 0);
  const int64_t C = spec.hidden, D = spec.head_dim;
  auto s = be.create_stream("machine probe");
  auto device = [&](size_t bytes, const char* what) {
    return be.alloc(MemoryKind::kDevice, std::max<size_t>(bytes, 4), what);
  };
  Buffer params = device(size_t(lay.numel) * dsz, "probe layer"),
         grads = device(size_t(lay.numel) * 4, "probe grads"),
         work = device(LayerWorkspace::bytes_needed(spec, M, dt), "probe workspace"),
         x = device(size_t(M * C) * dsz, "probe x"), y = device(size_t(M * C) * dsz, "probe y"),
         g = device(size_t(M * C) * dsz, "probe dy"),
         f32 = device(size_t(std::max(lay.numel, M * C)) * 4, "probe fp32"),
         ints = device(size_t(2 * M + 2) * 4, "probe positions"),
         freq = device(size_t(D / 2) * 4, "probe inv_freq");
  Buffer host = be.alloc(MemoryKind::kPinnedHost, size_t(std::max(lay.numel, M * C)) * 4 +
                                                      size_t(2 * M + 2) * 4,
                         "probe staging");
  float* hf = static_cast<float*>(host.data());
  auto upload = [&](void* dst, int64_t n, uint64_t seed) {  // small values, cast on the device
    std::vector<float> v(static_cast<size_t>(n));
    fill_small(v, seed);
    std::memcpy(hf, v.data(), size_t(n) * 4);
    be.copy(f32.data(), hf, size_t(n) * 4, *s);
    be.convert(Tensor(dst, dt, {n}), Tensor(f32.data(), DType::kF32, {n}), *s);
    be.synchronize(*s);
  };
  upload(params.data(), lay.numel, 1);
  upload(x.data(), M * C, 2);
  std::vector<int32_t> pos(static_cast<size_t>(M)), cu{0};
  for (int64_t t = 0; t < M; ++t) pos[size_t(t)] = int32_t(t % S);
  for (int64_t t = S; t < M; t += S) cu.push_back(int32_t(t));
  cu.push_back(int32_t(M));
  int32_t* hi = reinterpret_cast<int32_t*>(hf);
  std::copy(pos.begin(), pos.end(), hi);
  std::copy(cu.begin(), cu.end(), hi + M);
  be.copy(ints.data(), hi, size_t(M + int64_t(cu.size())) * 4, *s);
  const std::vector<float> inv = rope_inv_freq(spec);
  be.synchronize(*s);  // the staging is reused
  std::memcpy(hf, inv.data(), inv.size() * 4);
  be.copy(freq.data(), hf, inv.size() * 4, *s);
  be.synchronize(*s);

  StepInputs in;
  in.tokens = M;
  in.positions = Tensor(ints.data(), DType::kI32, {M});
  in.cu_seqlens = Tensor(static_cast<int32_t*>(ints.data()) + M, DType::kI32,
                         {int64_t(cu.size())});
  in.inv_freq = Tensor(freq.data(), DType::kF32, {int64_t(inv.size())});
  be.set_host_cu_seqlens(in.cu_seqlens, cu);
  const LayerParams P = LayerParams::view(lay, params.data(), dt);
  const LayerParams G = LayerParams::view(lay, grads.data(), DType::kF32);
  LayerWorkspace ws = LayerWorkspace::carve(spec, M, dt, work.data());
  const Tensor tx(x.data(), dt, {M, C}), ty(y.data(), dt, {M, C}), tg(g.data(), dt, {M, C});
  be.fill_zero(Tensor(grads.data(), DType::kF32, {lay.numel}), *s);
  const int reps = 3;
  LayerTimes r;
  // Run the layer back to back first, as a step does: a GPU's clocks fall under sustained load.
  for (const auto t0 = Clock::now(); seconds_since(t0) < hot_s;) {
    layer_forward(be, spec, P, in, ws, tx, Tensor(), *s);
    layer_backward(be, spec, P, G, in, ws, tx, tg, *s);
    be.synchronize(*s);
  }
  r.forward = median_time(reps, [&] {
    layer_forward(be, spec, P, in, ws, tx, ty, *s);
    be.synchronize(*s);
  });
  r.backward = median_time(reps, [&] {
    be.copy(g.data(), y.data(), size_t(M * C) * dsz, *s);  // some ∂L/∂y of the layer's scale
    layer_forward(be, spec, P, in, ws, tx, Tensor(), *s);
    layer_backward(be, spec, P, G, in, ws, tx, tg, *s);
    be.synchronize(*s);
  });
  // Matmul FLOPs, as bench/kernels counts them: the projections, and causal attention over the
  // samples; the recompute skips the down projection, the backward is twice the projections and
  // 2.5 times the attention.
  const double Q = double(spec.heads * D), KV = double(spec.kv_heads * D),
               I = double(spec.intermediate);
  const double lin = 2.0 * double(M) * (double(C) * (Q + 2 * KV) + Q * double(C) + 3 * double(C) * I);
  const double down = 2.0 * double(M) * I * double(C);
  double att = 0;
  for (size_t i = 1; i < cu.size(); ++i) {
    const double n = cu[i] - cu[i - 1];
    att += 4.0 * n * n * Q / 2;
  }
  r.flops = (lin + att) + (lin - down + att) + (2 * lin + 2.5 * att);
  return r;
}

namespace {

// Σ g² and CPU AdamW over kAdamParams, the gradient in the compute dtype, in pinned memory as
// the engine's state is; with `copies`, while another thread keeps an H2D and a D2H copy running
// (the engine's uploads and gradient downloads), and then `beside_gbps` (not null) gets the bytes
// those copies moved a second meanwhile, both directions. `what` other than kAll: that pass of
// the clipped update alone, without the Σ g² (the device formed it before the gradient's D2H).
double adam_rate(Backend& be, bool copies, int64_t n, AdamWWrite what = AdamWWrite::kAll,
                 double* beside_gbps = nullptr) {
  const DType gd = be.compute_dtype();
  const size_t gsz = dtype_size(gd);
  Buffer state = be.alloc(MemoryKind::kPinnedHost, size_t(n) * (12 + gsz), "probe AdamW state");
  float* p = static_cast<float*>(state.data());
  float* m = p + n;
  float* v = m + n;
  void* g = v + n;
  std::fill(p, p + n, 0.01f);
  std::memset(m, 0, size_t(n) * 8);
  if (gd == DType::kF32)
    std::fill(static_cast<float*>(g), static_cast<float*>(g) + n, 0.001f);
  else
    std::fill(static_cast<uint16_t*>(g), static_cast<uint16_t*>(g) + n, uint16_t(0x3a83));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> copied{0};
  std::thread traffic;
  Buffer pin, dev;
  std::unique_ptr<Stream> up, down;
  if (copies) {
    pin = be.alloc(MemoryKind::kPinnedHost, 2 * kCopyBytes, "probe copies");
    dev = be.alloc(MemoryKind::kDevice, 2 * kCopyBytes, "probe copies");
    up = be.create_stream("probe H2D");
    down = be.create_stream("probe D2H");
    char* h = static_cast<char*>(pin.data());
    char* d = static_cast<char*>(dev.data());
    traffic = std::thread([&, h, d] {
      while (!stop.load()) {
        be.copy(d, h, kCopyBytes, *up);
        be.copy(h + kCopyBytes, d + kCopyBytes, kCopyBytes, *down);
        be.synchronize(*up);
        be.synchronize(*down);
        copied += 2 * kCopyBytes;
      }
    });
  }
  const AdamWParams hp{1e-5f, 0.9f, 0.999f, 1e-8f, 0.0f};
  int64_t step = 0;
  double t = 0;
  const uint64_t copied0 = copied.load();
  const auto t0 = Clock::now();
  try {
    t = median_time(3, [&] {  // as the update worker consumes a gradient piece: Σ g² with it
      double ss = 0;
      adamw_step(p, m, v, g, gd, n, ++step, hp, 1.0f, nullptr, what,
                 what == AdamWWrite::kAll ? &ss : nullptr);
    });
  } catch (...) {
    stop = true;
    if (traffic.joinable()) traffic.join();
    throw;
  }
  if (beside_gbps) *beside_gbps = double(copied.load() - copied0) * 1e-9 / seconds_since(t0);
  stop = true;
  if (traffic.joinable()) traffic.join();
  return double(n) / t;
}

double memcpy_gbps() {
  const size_t bytes = size_t(256) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  ThreadPool& pool = ThreadPool::global();
  const double t = median_time(3, [&] {
    pool.parallel_for(int64_t(bytes), int64_t(4) << 20, [&](int64_t lo, int64_t hi) {
      std::memcpy(b.data() + lo, a.data() + lo, size_t(hi - lo));
    });
  });
  return 2.0 * double(bytes) / t * 1e-9;  // read and write
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

nlohmann::json to_json(const MachineConstants& m) {
  return {{"device", m.device},
          {"measured_at", m.measured_at},
          {"h2d_gbps", m.h2d_gbps},
          {"d2h_gbps", m.d2h_gbps},
          {"host_gbps", m.host_gbps},
          {"adam_params_per_s", m.adam_params_per_s},
          {"adam_copy_params_per_s", m.adam_copy_params_per_s},
          {"adam_master_params_per_s", m.adam_master_params_per_s},
          {"adam_moments_params_per_s", m.adam_moments_params_per_s},
          {"copy_beside_adam_gbps", m.copy_beside_adam_gbps},
          {"layer_forward_s", m.layer_forward_s},
          {"layer_backward_s", m.layer_backward_s},
          {"layer_tflops", m.layer_tflops}};
}

// Null when the entry is not a complete, positive set of constants (an older or edited file).
// `micro_tokens`: the key's M.
std::optional<MachineConstants> from_json(const std::string& key, int64_t micro_tokens,
                                          const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  MachineConstants m;
  m.key = key;
  m.micro_tokens = micro_tokens;
  auto num = [&](const char* k, double* out) {
    auto it = j.find(k);
    if (it == j.end() || !it->is_number() || !(it->get<double>() > 0) ||
        !std::isfinite(it->get<double>()))
      return false;
    *out = it->get<double>();
    return true;
  };
  auto text = [&](const char* k, std::string* out) {
    auto it = j.find(k);
    if (it == j.end() || !it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  if (!text("device", &m.device) || !text("measured_at", &m.measured_at) ||
      !num("h2d_gbps", &m.h2d_gbps) || !num("d2h_gbps", &m.d2h_gbps) ||
      !num("host_gbps", &m.host_gbps) || !num("adam_params_per_s", &m.adam_params_per_s) ||
      !num("adam_copy_params_per_s", &m.adam_copy_params_per_s) ||
      !num("adam_master_params_per_s", &m.adam_master_params_per_s) ||
      !num("adam_moments_params_per_s", &m.adam_moments_params_per_s) ||
      !num("layer_forward_s", &m.layer_forward_s) ||
      !num("layer_backward_s", &m.layer_backward_s) || !num("layer_tflops", &m.layer_tflops))
    return std::nullopt;
  num("copy_beside_adam_gbps", &m.copy_beside_adam_gbps);  // 0 where no copy finished in time
  return m;
}

}  // namespace

std::string machine_key(Backend& be, const ModelSpec& spec, int64_t micro_tokens,
                        int64_t sample_tokens) {
  return str_cat(be.name(), " | layer C", spec.hidden, " I", spec.intermediate, " H", spec.heads,
                 "/", spec.kv_heads, "x", spec.head_dim, spec.qk_norm ? " qknorm" : "",
                 spec.attention_bias ? " bias" : "", " | M", micro_tokens, " S", sample_tokens);
}

MachineConstants measure_machine(Backend& be, const ModelSpec& spec, int64_t micro_tokens,
                                 int64_t sample_tokens, const ProbeSize& size) {
  SF_CHECK(micro_tokens >= 1 && spec.layers >= 1, "machine probe: nothing to measure");
  const int64_t S = std::clamp<int64_t>(sample_tokens, 1, micro_tokens);
  MachineConstants m;
  m.key = machine_key(be, spec, micro_tokens, S);
  m.micro_tokens = micro_tokens;
  m.device = be.name();
  m.measured_at = utc_now();
  {
    Buffer pin = be.alloc(MemoryKind::kPinnedHost, kCopyBytes, "probe pinned");
    Buffer dev = be.alloc(MemoryKind::kDevice, kCopyBytes, "probe device");
    std::memset(pin.data(), 1, kCopyBytes);
    auto s = be.create_stream("probe copies");
    m.h2d_gbps = copy_gbps(be, dev.data(), pin.data(), *s);
    m.d2h_gbps = copy_gbps(be, pin.data(), dev.data(), *s);
  }
  m.host_gbps = memcpy_gbps();
  const int64_t n = size.adam_params > 0 ? size.adam_params : kAdamParams;
  m.adam_params_per_s = adam_rate(be, false, n);
  m.adam_copy_params_per_s = adam_rate(be, true, n, AdamWWrite::kAll, &m.copy_beside_adam_gbps);
  m.adam_master_params_per_s = adam_rate(be, false, n, AdamWWrite::kWeights);
  m.adam_moments_params_per_s = adam_rate(be, false, n, AdamWWrite::kMoments);
  const LayerTimes lt = time_layer(be, spec, micro_tokens, S, size.layer_hot_s);
  m.layer_forward_s = lt.forward / double(micro_tokens);
  m.layer_backward_s = lt.backward / double(micro_tokens);
  m.layer_tflops = lt.flops / (lt.forward + lt.backward) * 1e-12;
  return m;
}

fs::path default_machine_file() {
  if (const char* f = std::getenv("SLIDEFORMER_MACHINE_FILE"); f && *f) return f;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return fs::path(x) / "slideformer" / "machine.json";
  if (const char* h = std::getenv("HOME"); h && *h)
    return fs::path(h) / ".cache" / "slideformer" / "machine.json";
  return fs::path("slideformer-machine.json");
}

std::optional<MachineConstants> cached_machine_constants(Backend& be, const ModelSpec& spec,
                                                         int64_t micro_tokens,
                                                         int64_t sample_tokens,
                                                         const fs::path& file) {
  const int64_t S = std::clamp<int64_t>(sample_tokens, 1, std::max<int64_t>(micro_tokens, 1));
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return std::nullopt;
  std::ifstream in(file);
  const nlohmann::json all = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!usable_cache(all)) return std::nullopt;
  const std::string key = machine_key(be, spec, micro_tokens, S);
  if (!all["entries"].contains(key)) return std::nullopt;
  return from_json(key, micro_tokens, all["entries"][key]);
}

MachineConstants machine_constants(Backend& be, const ModelSpec& spec, int64_t micro_tokens,
                                   int64_t sample_tokens, const fs::path& file, bool remeasure,
                                   std::string* note, const ProbeSize& size) {
  const int64_t S = std::clamp<int64_t>(sample_tokens, 1, std::max<int64_t>(micro_tokens, 1));
  const std::string key = machine_key(be, spec, micro_tokens, S);
  nlohmann::json all = nlohmann::json::object();
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) {
    std::ifstream in(file);
    // An unreadable, foreign or older cache is not an error: it is measured again and rewritten.
    all = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!usable_cache(all))
      all = empty_cache();
    else if (!remeasure)
      if (auto m = from_json(key, micro_tokens, all["entries"][key])) {
        if (note) *note = str_cat("machine constants from ", file.string(), " (measured ",
                                  m->measured_at, ")");
        return *m;
      }
  } else {
    all = empty_cache();
  }
  const MachineConstants m = measure_machine(be, spec, micro_tokens, S, size);
  all["entries"][key] = to_json(m);
  try {
    fs::create_directories(file.parent_path().empty() ? fs::path(".") : file.parent_path());
    write_file_atomic(file, all.dump(2) + "\n");
    if (note) *note = str_cat("machine constants measured now, cached in ", file.string());
  } catch (const std::exception& e) {
    if (note) *note = str_cat("machine constants measured now; not cached (", e.what(), ")");
  }
  return m;
}

MachineConstants MachineConstants::with_disk(const NvmeBandwidth& disk) const {
  MachineConstants m = *this;
  m.nvme_read_gbps = disk.read_gbps;
  m.nvme_write_gbps = disk.write_gbps;
  m.nvme_mixed_gbps = disk.mixed_gbps;
  return m;
}

std::string describe(const MachineConstants& m) {
  std::ostringstream o;
  o.setf(std::ios::fixed);
  o.precision(1);
  o << "machine (" << m.device << ", measured " << m.measured_at << "): H2D " << m.h2d_gbps
    << " GB/s, D2H " << m.d2h_gbps << " GB/s (pinned), host memcpy " << m.host_gbps
    << " GB/s; CPU AdamW ";
  o.precision(2);  // replays of a run's prediction read these (bench/e2e/replay_predictions.py)
  o << m.adam_params_per_s * 1e-9 << " G params/s (" << m.adam_copy_params_per_s * 1e-9
    << " while copies run, they then at ";
  o.precision(1);
  o << m.copy_beside_adam_gbps << " GB/s both ways); the layer ";
  o.precision(3);  // 0.6 µs/token is ± 8 % at one decimal
  o << m.layer_forward_s * 1e6 << " µs/token forward, " << m.layer_backward_s * 1e6
    << " µs/token recompute + backward (";
  o.precision(1);
  if (m.layer_tflops >= 1)
    o << m.layer_tflops << " TFLOP/s)";
  else
    o << m.layer_tflops * 1e3 << " GFLOP/s)";
  o.precision(2);
  o << "; the clipped update's passes alone: the master " << m.adam_master_params_per_s * 1e-9
    << ", m and v " << m.adam_moments_params_per_s * 1e-9 << " G params/s";
  return o.str();
}

}  // namespace sf
