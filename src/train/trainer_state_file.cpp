// defines: parse_trainer_state, read_trainer_state, resume_config_difference (see
// trainer_state_file.h)
#include "train/trainer_state_file.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdint>
#include <set>

#include "core/error.h"
#include "core/input_file.h"
#include "train/config_file.h"
#include "train/options.h"

namespace sf {
namespace fs = std::filesystem;

namespace {

// Options that may change between a run and its resume: where things go and how often they are
// reported, not what is computed.
const std::set<std::string> kResumeMayChange = {"output_dir",
                                                "resume_from_checkpoint",
                                                "overwrite_output_dir",
                                                "save_steps",
                                                "save_total_limit",
                                                "logging_steps",
                                                "eval_steps",
                                                "eval_data",
                                                "per_device_eval_batch_size",
                                                "window",
                                                "backend",
                                                "cache",
                                                "no_save",
                                                "save_dtype",
                                                "report_to",
                                                "logging_dir",
                                                "peak_tflops",
                                                "host_memory",
                                                "machine_file",
                                                "nvme_dir",
                                                "nvme_layers",
                                                "nvme_masters",
                                                "nvme_checkpoints",
                                                "nvme_bandwidth"};

}  // namespace

// An integer field: nlohmann's get<int64_t>() of a float (1e300) or of an unsigned past INT64_MAX
// converts out of range (undefined behaviour, found by fuzz_train_state).
int64_t int_field(const nlohmann::json& j, const char* key, const std::string& where) {
  const nlohmann::json& v = j.at(key);
  SF_CHECK(v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > INT64_MAX),
           where, ": \"", key, "\" is ", v.dump().substr(0, 40),
           ", not an integer of 64 bits: corrupt checkpoint");
  return v.get<int64_t>();
}

TrainerState parse_trainer_state(const std::string& text, const fs::path& file) {
  const std::string where = file.string();
  check_json_depth(text, where);  // the file nests 1 deep: anything deeper is corrupt
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    SF_FAIL(where, ": not valid JSON (truncated or corrupt checkpoint): ", json_error_text(e));
  }
  TrainerState st;
  try {
    SF_CHECK(j.is_object(), where, ": not a JSON object: corrupt checkpoint");
    SF_CHECK(j.at("format") == kTrainerStateFormat, where, ": format ", j.at("format").dump(),
             " is not ", kTrainerStateFormat, ": not a checkpoint this version wrote");
    st.global_step = int_field(j, "global_step", where);
    st.total_steps = int_field(j, "max_steps", where);
    st.epoch = j.at("epoch").get<double>();
    st.batcher = j.at("data_position").get<std::string>();
    st.config_yaml = j.at("training_args").get<std::string>();
    const int64_t done = int_field(j, "optimizer_steps_done", where);
    SF_CHECK(done == st.global_step && st.global_step >= 1 && st.global_step <= st.total_steps,
             where, ": inconsistent step counts (global_step ", st.global_step,
             ", optimizer_steps_done ", done, ", max_steps ", st.total_steps,
             "): corrupt checkpoint");
    SF_CHECK(std::isfinite(st.epoch) && st.epoch >= 0, where, ": epoch ", st.epoch,
             " is not a number ≥ 0: corrupt checkpoint");
  } catch (const nlohmann::json::exception& e) {
    SF_FAIL(where, ": a field is missing or of the wrong type (", json_error_text(e),
            "): corrupt checkpoint");
  }
  return st;
}

TrainerState read_trainer_state(const fs::path& dir) {
  const fs::path file = dir / kTrainerStateFile;
  return parse_trainer_state(read_text_file(file, "the checkpoint's trainer state"), file);
}

std::string resume_config_difference(const std::string& saved_yaml, const TrainConfig& now) {
  // yaml-cpp throws its own exceptions for syntax (Load), for a subscript of a scalar and for a
  // list or map where a scalar is expected (as<std::string>): each is "not readable".
  try {
    const YAML::Node saved = YAML::Load(saved_yaml);
    if (!saved.IsMap()) return "the saved configuration is not a YAML mapping (corrupt checkpoint)";
    std::string diff;
    for (const auto& o : train_options()) {
      if (kResumeMayChange.count(o.name)) continue;
      const YAML::Node v = saved[o.name];
      const std::string was = v ? v.as<std::string>() : "(absent)";
      const std::string is = o.get(now);
      if (was != is)
        diff += str_cat(diff.empty() ? "" : "; ", o.name, " was '", was, "', now '", is, "'");
    }
    return diff;
  } catch (const YAML::Exception& e) {
    return str_cat("the saved configuration is not readable (", e.msg, "; corrupt checkpoint)");
  }
}

}  // namespace sf
