// defines: sf::DecoderOptions, sf::Decoder — inference with a KV cache on one backend: the prompt
// is run once (in passes of at most prefill_chunk tokens) and every later token alone, against
// per-layer K/V caches kept on the device in the compute dtype. Not the training engine: no
// master weights, no optimizer, no checkpoints; the weights are converted once to the compute
// dtype.
//
// Where the layers live is decided at construction from the device memory the backend reports
// free (or DecoderOptions::device_budget): all resident when they fit beside the outer unit
// (embedding, final norm, head), the caches and the workspaces; otherwise a ring of `ring` device
// slots through which the layers stream from pinned host memory in every pass (H2D of layer
// i + ring - 1 overlapping layer i) — correct, and as slow as the host link makes it. summary()
// says which.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/spec.h"

namespace sf {

struct DecoderOptions {
  int64_t max_tokens = 0;       // the longest sequence (prompt + new tokens): the caches' rows
  int64_t prefill_chunk = 512;  // tokens one pass takes at most (the workspaces' rows)
  bool all_logits = false;      // forward(…, true) allowed: the logits buffer takes chunk rows
  uint64_t device_budget = 0;   // device bytes the decoder may take; 0: what the device has free
  int ring = 2;                 // layer slots when the layers stream
};

// Fills one tensor's fp32 values (desc.shape's element count), e.g. from a checkpoint.
using WeightFill = std::function<void(const TensorDesc& desc, float* dst)>;

class Decoder {
 public:
  Decoder(Backend& backend, ModelSpec spec, DecoderOptions options, const WeightFill& fill);
  ~Decoder();
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  const ModelSpec& spec() const { return spec_; }
  // Runs `ids` after the tokens already cached (RoPE positions continue from length()) and
  // returns the F32 logits of the last one [V], or with all_logits those of every one [n, V].
  std::vector<float> forward(const std::vector<int32_t>& ids, bool all_logits = false);
  void reset() { length_ = 0; }  // forgets the sequence; the memory stays
  int64_t length() const { return length_; }
  int64_t capacity() const { return opt_.max_tokens; }
  bool streaming() const { return streaming_; }
  const std::string& summary() const { return summary_; }
  // The device bytes a decoder of these options takes: layers resident, or streaming through
  // options.ring slots.
  static uint64_t device_bytes(const ModelSpec& spec, const DecoderOptions& options, DType dt,
                               bool streaming);

 private:
  struct Device;  // views into the one device buffer
  void load_weights(const WeightFill& fill);
  void pass(const int32_t* ids, int64_t T, bool logits, bool all_rows, float* out);
  void run_layers(int64_t T);
  void issue_load(int layer);  // streaming: the H2D of `layer` into its ring slot

  Backend& be_;
  ModelSpec spec_;
  DecoderOptions opt_;
  DType dt_;
  bool streaming_ = false;
  std::string summary_;
  int64_t length_ = 0;
  int64_t layer_numel_ = 0;  // elements of the largest layer's flat range

  Buffer dev_, host_layers_, host_io_;  // device; pinned host layers (streaming); pinned I/O
  std::unique_ptr<Device> d_;
  std::unique_ptr<Stream> compute_, h2d_;
  std::vector<std::unique_ptr<Event>> loaded_, slot_free_;
};

}  // namespace sf
