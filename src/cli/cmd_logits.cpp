// `slideformer logits --model DIR --batch BATCH.json --out LOGITS.safetensors`: forward only, the
// logits of each row of "input_ids" (rows of equal length). Ids are checked against the model's
// vocabulary before anything is allocated (no wrap of ids >= 2^31); logits that are not all
// finite are refused, naming the first bad position, instead of written.
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "model/spec.h"
#include "train/checkpoint.h"
#include "train/config_file.h"
#include "train/data.h"

namespace sf {
namespace {

std::vector<Sample> read_batch(const std::filesystem::path& file, int64_t vocab) {
  const std::string text = read_text_file(file, "the logits batch");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    SF_FAIL(file.string(), ": not valid JSON (", e.what(), ")");
  }
  SF_CHECK(j.is_object() && j.contains("input_ids") && j["input_ids"].is_array() &&
               !j["input_ids"].empty(),
           file.string(), ": expected \"input_ids\": [[...], ...] with at least one row");
  std::vector<Sample> samples;
  size_t r = 0;
  for (const auto& row : j["input_ids"]) {
    SF_CHECK(row.is_array() && !row.empty(), file.string(), ": input_ids row ", r,
             " must be a non-empty list of token ids");
    Sample s;
    for (size_t k = 0; k < row.size(); ++k) {
      const auto& v = row[k];
      // Integers only, checked in 64 bits before narrowing: 4294967296 must not become 0.
      const bool integer = v.is_number_integer();
      const int64_t id =
          !integer ? -1
          : v.is_number_unsigned()
              ? (v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(v.get<uint64_t>()))
              : v.get<int64_t>();
      SF_CHECK(integer && id >= 0 && id < vocab, file.string(), ": input_ids[", r, "][", k,
               "] = ", v.dump(), " is not a token id of this model (integers in [0, ", vocab, "))");
      s.ids.push_back(int32_t(id));
    }
    SF_CHECK(r == 0 || s.ids.size() == samples[0].ids.size(), file.string(), ": input_ids row ", r,
             " has ", s.ids.size(), " ids, row 0 has ", samples[0].ids.size(),
             ": rows must have equal lengths");
    s.labels = s.ids;
    samples.push_back(std::move(s));
    ++r;
  }
  return samples;
}

}  // namespace

int cmd_logits(const std::vector<std::string>& argv) {
  Args a(argv, {"model", "batch", "out"}, {}, "logits");
  const std::filesystem::path model = a.required("model"), batch_file = a.required("batch");
  const std::filesystem::path out = a.required("out");
  const ModelSpec spec = load_model_spec(model);
  const std::vector<Sample> samples = read_batch(batch_file, spec.vocab);
  std::vector<const Sample*> ptrs;
  for (const auto& s : samples) ptrs.push_back(&s);
  Batch b = pack_samples(ptrs);
  auto backend = make_cpu_backend();
  EngineOptions opt;
  opt.window = 1;
  opt.max_tokens = b.tokens();
  opt.max_sequences = int64_t(samples.size());
  Engine engine(*backend, spec, opt);
  load_model_weights(engine, model);
  std::vector<float> logits = engine.logits(b);
  const int64_t S = int64_t(samples[0].ids.size());
  for (size_t i = 0; i < logits.size(); ++i)
    SF_CHECK(std::isfinite(logits[i]), "logits of ", model.string(), " on ", batch_file.string(),
             " are not finite (", logits[i], " at row ", int64_t(i) / (S * spec.vocab),
             ", position ", (int64_t(i) / spec.vocab) % S, ", token ", int64_t(i) % spec.vocab,
             "): the model's weights or config (e.g. rope_theta) overflow; nothing was written");
  write_safetensors_file(
      out, {TensorToWrite{"logits", {int64_t(samples.size()), S, spec.vocab}, logits.data()}},
      DType::kF32);
  std::cout << "wrote " << out.string() << "\n";
  return 0;
}

}  // namespace sf
