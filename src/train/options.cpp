#include "train/options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/size_parse.h"

namespace sf {
namespace {

using Type = OptionSpec::Type;
constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();

std::string normalise(std::string k) {
  std::replace(k.begin(), k.end(), '-', '_');
  return k;
}

int64_t parse_int(const std::string& v, const std::string& where, int64_t lo, int64_t hi) {
  int64_t x = 0;
  const char* end = v.data() + v.size();
  auto r = std::from_chars(v.data() + (v.size() && v[0] == '+'), end, x);
  const bool whole = !v.empty() && r.ec != std::errc::invalid_argument && r.ptr == end;
  SF_CHECK(whole, where, ": expects an integer in [", lo, ", ", hi, "], got '", v, "'");
  SF_CHECK(r.ec != std::errc::result_out_of_range && x >= lo && x <= hi, where,
           ": must be an integer in [", lo, ", ", hi, "], got ", v);
  return x;
}

// A number in [lo, hi] (lo excluded when `open_lo`). `as_float`: the value is kept as a float,
// so it must also be in range, and non-zero when zero is excluded, after rounding to float.
double parse_number(const std::string& v, const std::string& where, double lo, double hi,
                    bool open_lo, bool as_float) {
  double x = 0;
  const char* end = v.data() + v.size();
  auto r = std::from_chars(v.data() + (v.size() && v[0] == '+'), end, x);
  const std::string range = str_cat(open_lo ? "(" : "[", lo, ", ", hi, "]");
  SF_CHECK(!v.empty() && r.ec == std::errc() && r.ptr == end && std::isfinite(x), where,
           ": expects a number in ", range, ", got '", v, "'");
  SF_CHECK(x <= hi && (open_lo ? x > lo : x >= lo), where, ": must be in ", range, ", got ", v);
  if (as_float) {
    const float f = float(x);
    SF_CHECK(std::isfinite(f) && (open_lo ? f > float(lo) : true), where, ": ", v, " is ",
             std::isfinite(f) ? "0" : "infinite", " in float (single) precision, which the ",
             "optimizer uses; give a value in ", range, " that float can hold (e.g. >= 1e-38)");
  }
  return x;
}

bool parse_bool(const std::string& v, const std::string& where) {
  std::string s = v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (s == "true" || s == "1" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "0" || s == "no" || s == "off") return false;
  SF_FAIL(where, ": expects true or false, got '", v, "'");
}

std::string pick(const std::string& v, const std::string& where,
                 const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), v) != choices.end()) return v;
  std::string list;
  for (const auto& ch : choices) list += (list.empty() ? "" : "|") + ch;
  SF_FAIL(where, ": must be one of ", list, ", got '", v, "'");
}

std::string num(double x) {
  char b[32];
  auto r = std::to_chars(b, b + sizeof(b), x);
  return std::string(b, r.ptr);
}
std::string numf(float x) {
  char b[32];
  auto r = std::to_chars(b, b + sizeof(b), x);
  return std::string(b, r.ptr);
}
std::string boolean(bool b) { return b ? "true" : "false"; }

const std::vector<std::string> kFormats = {"auto",     "text",     "alpaca",
                                           "sharegpt", "messages", "tokens"};
const std::vector<std::string> kMasks = {"assistant", "all", "last"};
const std::vector<std::string> kSchedules = {"constant", "constant_with_warmup", "linear",
                                             "cosine"};
const std::vector<std::string> kDtypes = {"bf16", "f32"};
const std::vector<std::string> kBackends = {"auto", "cpu", "cuda"};
const std::vector<std::string> kDeviceOptimizer = {"auto", "off", "all"};
const std::vector<std::string> kNvmeCheckpoints = {"auto", "on", "off"};
const std::vector<std::string> kReports = {"none", "tensorboard"};
const std::vector<std::string> kThinking = {"auto", "true", "false"};
const std::vector<std::string> kOverflow = {"chunk", "truncate"};

// A JSON object, kept in its compact form (the cache key and the resume check compare it).
std::string parse_kwargs(const std::string& v, const std::string& where) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(v);
  } catch (const nlohmann::json::exception&) {
    SF_FAIL(where, ": expects a JSON object such as {\"enable_thinking\": false}, got '", v, "'");
  }
  SF_CHECK(j.is_object(), where, ": expects a JSON object such as {\"enable_thinking\": false}, ",
           "got '", v, "'");
  return j.dump();
}

// The table is laid out by hand (one option a paragraph); clang-format cannot see through SF_SET.
// clang-format off
#define SF_SET [](TrainConfig & c, const std::string& v, const std::string& w)
#define SF_GET [](const TrainConfig& c) -> std::string

std::vector<OptionSpec> make_options() {
  return {
      // ---- model and data ----
      {"model_name_or_path", {"model"}, Type::kPath, "Hugging Face model directory to fine-tune",
       "a directory", {}, "model and data", SF_SET { c.model_dir = v; },
       SF_GET { return c.model_dir.string(); }},
      {"train_data", {"data", "train_file"}, Type::kPath, "training data: .txt, .jsonl or .json",
       "a file", {}, "model and data", SF_SET { c.data = v; }, SF_GET { return c.data.string(); }},
      {"eval_data", {"eval_file"}, Type::kPath, "held-out data evaluated with the same masks",
       "a file", {}, "model and data", SF_SET { c.eval_data = v; },
       SF_GET { return c.eval_data.string(); }},
      {"val_size", {}, Type::kFloat,
       "held out of train_data for evaluation (seeded): a fraction, or a count when >= 1",
       "number in [0, 1e9]", {}, "model and data",
       SF_SET { c.val_size = parse_number(v, w, 0, 1e9, false, false); },
       SF_GET { return num(c.val_size); }},
      {"tokenizer", {"tokenizer_name_or_path"}, Type::kPath,
       "directory with tokenizer.json (default: the model's)", "a directory", {},
       "model and data", SF_SET { c.tokenizer_dir = v; },
       SF_GET { return c.tokenizer_dir.string(); }},
      {"dataset_format", {}, Type::kEnum, "format of the JSON/JSONL records", "", kFormats,
       "model and data", SF_SET { c.dataset_format = pick(v, w, kFormats); },
       SF_GET { return c.dataset_format; }},
      {"columns", {}, Type::kList, "column remappings key=name,... (e.g. output=response)",
       "key=name,...", {}, "model and data",
       SF_SET {
         c.columns.clear();
         for (std::string cols = v; !cols.empty();) {
           auto comma = cols.find(',');
           std::string one = cols.substr(0, comma);
           SF_CHECK(one.find('=') != std::string::npos, w, ": expects key=name,..., got '", v, "'");
           c.columns.push_back(one);
           cols = comma == std::string::npos ? "" : cols.substr(comma + 1);
         }
       },
       SF_GET {
         std::string s;
         for (const auto& col : c.columns) s += (s.empty() ? "" : ",") + col;
         return s;
       }},
      {"chat_template", {"template"}, Type::kString,
       "chat template: llama3|llama2|chatml|FILE (default: the tokenizer's)", "a name or a file",
       {}, "model and data", SF_SET { c.chat_template = v; }, SF_GET { return c.chat_template; }},
      {"chat_template_kwargs", {"template_kwargs"}, Type::kString,
       "keyword options every render of the chat template sees, as apply_chat_template(**kwargs)"
       " (a YAML mapping or JSON text)", "a JSON object", {}, "model and data",
       SF_SET { c.chat_template_kwargs = parse_kwargs(v, w); },
       SF_GET { return c.chat_template_kwargs; }},
      {"enable_thinking", {}, Type::kEnum,
       "the template's enable_thinking (Qwen3): false renders and trains replies after an empty "
       "<think></think>; auto: the template's default", "", kThinking, "model and data",
       SF_SET { c.enable_thinking = pick(v, w, kThinking); },
       SF_GET { return c.enable_thinking; }},
      {"loss_mask", {}, Type::kEnum, "which tokens of a conversation carry the loss", "", kMasks,
       "model and data", SF_SET { c.loss_mask = pick(v, w, kMasks); },
       SF_GET { return c.loss_mask; }},
      {"packing", {}, Type::kBool, "pack whole samples into each step's rows", "true|false", {},
       "model and data", SF_SET { c.packing = parse_bool(v, w); },
       SF_GET { return boolean(c.packing); }},
      {"skip_malformed", {}, Type::kBool, "skip malformed records (counted) instead of stopping",
       "true|false", {}, "model and data", SF_SET { c.skip_malformed = parse_bool(v, w); },
       SF_GET { return boolean(c.skip_malformed); }},
      {"cache", {}, Type::kBool, "keep the tokenised data in OUTPUT/tokenized-cache (--no-cache)",
       "true|false", {}, "model and data", SF_SET { c.cache = parse_bool(v, w); },
       SF_GET { return boolean(c.cache); }},
      {"cutoff_len", {"max_seq_length"}, Type::kInt, "tokens per sample at most",
       "integer in [2, 16777216]", {}, "model and data",
       SF_SET { c.cutoff_len = parse_int(v, w, 2, int64_t(1) << 24); },
       SF_GET { return std::to_string(c.cutoff_len); }},
      {"text_overflow", {}, Type::kEnum,
       "a dataset's text record longer than cutoff_len: cut into cutoff_len samples as a .txt "
       "file is (chunk), or its first cutoff_len tokens kept (truncate); the count is printed",
       "", kOverflow, "model and data", SF_SET { c.text_overflow = pick(v, w, kOverflow); },
       SF_GET { return c.text_overflow; }},
      {"show_sample", {}, Type::kBool,
       "print the first sample of each data file as the model sees it, «loss-carrying» parts marked",
       "true|false", {}, "model and data", SF_SET { c.show_sample = parse_bool(v, w); },
       SF_GET { return boolean(c.show_sample); }},
      // ---- output ----
      {"output_dir", {"output"}, Type::kPath,
       "where checkpoints, the final model and metrics go (required unless no_save)",
       "a directory", {}, "output", SF_SET { c.output_dir = v; },
       SF_GET { return c.output_dir.string(); }},
      {"no_save", {}, Type::kBool, "save no checkpoint and no final model", "true|false", {},
       "output", SF_SET { c.no_save = parse_bool(v, w); }, SF_GET { return boolean(c.no_save); }},
      {"overwrite_output_dir", {}, Type::kBool,
       "start afresh in an output directory that holds a run", "true|false", {}, "output",
       SF_SET { c.overwrite_output_dir = parse_bool(v, w); },
       SF_GET { return boolean(c.overwrite_output_dir); }},
      {"save_dtype", {}, Type::kEnum, "dtype of the saved weights", "", kDtypes, "output",
       SF_SET { c.save_dtype = pick(v, w, kDtypes); }, SF_GET { return c.save_dtype; }},
      {"save_steps", {}, Type::kInt, "a checkpoint every N optimizer steps (0: at the end only)",
       "integer >= 0", {}, "output", SF_SET { c.save_steps = parse_int(v, w, 0, kMaxI64); },
       SF_GET { return std::to_string(c.save_steps); }},
      {"save_total_limit", {}, Type::kInt, "checkpoints kept, oldest removed first (0: all)",
       "integer >= 0", {}, "output",
       SF_SET { c.save_total_limit = parse_int(v, w, 0, kMaxI64); },
       SF_GET { return std::to_string(c.save_total_limit); }},
      {"resume_from_checkpoint", {"resume"}, Type::kString,
       "continue a run exactly: a checkpoint directory, or auto (OUTPUT's latest, if any)",
       "auto or a directory", {}, "output", SF_SET { c.resume_from_checkpoint = v; },
       SF_GET { return c.resume_from_checkpoint; }},
      // ---- schedule ----
      {"max_steps", {"steps"}, Type::kInt, "optimizer steps (-1: num_train_epochs decides)",
       "-1 or integer >= 1", {}, "schedule",
       SF_SET {
         c.steps = parse_int(v, w, -1, kMaxI64);
         SF_CHECK(c.steps != 0, w, ": must be -1 (use num_train_epochs) or >= 1, got 0");
       },
       SF_GET { return std::to_string(c.steps); }},
      {"num_train_epochs", {"epochs"}, Type::kFloat, "passes over the data (when max_steps is -1)",
       "number in (0, 1e6]", {}, "schedule",
       SF_SET { c.num_train_epochs = parse_number(v, w, 0, 1e6, true, false); },
       SF_GET { return num(c.num_train_epochs); }},
      {"per_device_train_batch_size", {"batch_size"}, Type::kInt,
       "samples per micro-batch (rows of cutoff_len with packing)", "integer in [1, 1048576]",
       {}, "schedule", SF_SET { c.batch_size = parse_int(v, w, 1, int64_t(1) << 20); },
       SF_GET { return std::to_string(c.batch_size); }},
      {"per_device_eval_batch_size", {"eval_batch_size"}, Type::kInt,
       "samples per evaluation batch (0: per_device_train_batch_size)",
       "integer in [0, 1048576]", {}, "schedule",
       SF_SET { c.eval_batch_size = parse_int(v, w, 0, int64_t(1) << 20); },
       SF_GET { return std::to_string(c.eval_batch_size); }},
      {"gradient_accumulation_steps", {"grad_accum"}, Type::kInt,
       "micro-batches per optimizer step; the loss is normalised over all their valid tokens",
       "integer in [1, 1048576]", {}, "schedule",
       SF_SET { c.grad_accum = parse_int(v, w, 1, int64_t(1) << 20); },
       SF_GET { return std::to_string(c.grad_accum); }},
      {"learning_rate", {"lr"}, Type::kFloat, "peak learning rate", "number in [0, 1e38]", {},
       "schedule", SF_SET { c.lr = float(parse_number(v, w, 0, 1e38, false, true)); },
       SF_GET { return numf(c.lr); }},
      {"adam_beta1", {"beta1"}, Type::kFloat, "AdamW beta1", "number in [0, 0.999999]", {},
       "schedule", SF_SET { c.beta1 = float(parse_number(v, w, 0, 0.999999, false, true)); },
       SF_GET { return numf(c.beta1); }},
      {"adam_beta2", {"beta2"}, Type::kFloat, "AdamW beta2", "number in [0, 0.999999]", {},
       "schedule", SF_SET { c.beta2 = float(parse_number(v, w, 0, 0.999999, false, true)); },
       SF_GET { return numf(c.beta2); }},
      {"adam_epsilon", {"eps"}, Type::kFloat, "AdamW epsilon (outside the sqrt)",
       "number in (0, 1]", {}, "schedule",
       SF_SET { c.eps = float(parse_number(v, w, 0, 1, true, true)); },
       SF_GET { return numf(c.eps); }},
      {"weight_decay", {}, Type::kFloat, "decoupled weight decay", "number in [0, 1e6]", {},
       "schedule", SF_SET { c.weight_decay = float(parse_number(v, w, 0, 1e6, false, true)); },
       SF_GET { return numf(c.weight_decay); }},
      {"max_grad_norm", {}, Type::kFloat, "clip the global gradient norm (0: off)",
       "number in [0, 1e38]", {}, "schedule",
       SF_SET { c.max_grad_norm = float(parse_number(v, w, 0, 1e38, false, true)); },
       SF_GET { return numf(c.max_grad_norm); }},
      {"lr_scheduler_type", {"schedule"}, Type::kEnum, "learning-rate schedule", "", kSchedules,
       "schedule", SF_SET { c.schedule = pick(v, w, kSchedules); },
       SF_GET { return c.schedule; }},
      {"warmup_steps", {}, Type::kInt, "linear warmup steps (wins over warmup_ratio)",
       "integer >= 0", {}, "schedule", SF_SET { c.warmup_steps = parse_int(v, w, 0, kMaxI64); },
       SF_GET { return std::to_string(c.warmup_steps); }},
      {"warmup_ratio", {}, Type::kFloat, "warmup as a fraction of all steps (rounded up)",
       "number in [0, 1]", {}, "schedule",
       SF_SET { c.warmup_ratio = parse_number(v, w, 0, 1, false, false); },
       SF_GET { return num(c.warmup_ratio); }},
      {"min_lr_ratio", {}, Type::kFloat, "floor of linear/cosine decay, as a fraction of the lr",
       "number in [0, 1]", {}, "schedule",
       SF_SET { c.min_lr_ratio = float(parse_number(v, w, 0, 1, false, true)); },
       SF_GET { return numf(c.min_lr_ratio); }},
      {"shuffle", {}, Type::kBool, "a seeded permutation of the samples per epoch", "true|false",
       {}, "schedule", SF_SET { c.shuffle = parse_bool(v, w); },
       SF_GET { return boolean(c.shuffle); }},
      {"seed", {}, Type::kInt, "seed of shuffling and of the val_size split",
       "integer in [0, 9223372036854775807]", {}, "schedule",
       SF_SET { c.seed = uint64_t(parse_int(v, w, 0, kMaxI64)); },
       SF_GET { return std::to_string(c.seed); }},
      // ---- evaluation and logging ----
      {"eval_steps", {}, Type::kInt, "evaluate every N optimizer steps (0: at the end only)",
       "integer >= 0", {}, "evaluation and logging",
       SF_SET { c.eval_steps = parse_int(v, w, 0, kMaxI64); },
       SF_GET { return std::to_string(c.eval_steps); }},
      {"logging_steps", {}, Type::kInt,
       "a progress line every N steps when stdout is not a terminal (first and last always)",
       "integer >= 1", {}, "evaluation and logging",
       SF_SET { c.logging_steps = parse_int(v, w, 1, kMaxI64); },
       SF_GET { return std::to_string(c.logging_steps); }},
      {"report_to", {}, Type::kEnum, "also write TensorBoard event files", "", kReports,
       "evaluation and logging", SF_SET { c.report_to = pick(v, w, kReports); },
       SF_GET { return c.report_to; }},
      {"logging_dir", {}, Type::kPath, "where TensorBoard event files go (default: OUTPUT/runs)",
       "a directory", {}, "evaluation and logging", SF_SET { c.logging_dir = v; },
       SF_GET { return c.logging_dir.string(); }},
      {"peak_tflops", {}, Type::kFloat,
       "bf16 dense peak of the device for the progress line's MFU (0: from the GPU's name, or "
       "SMs × clock; none on the CPU)",
       "number in [0, 1e6]", {}, "evaluation and logging",
       SF_SET { c.peak_tflops = parse_number(v, w, 0, 1e6, false, false); },
       SF_GET { return num(c.peak_tflops); }},
      // ---- engine ----
      {"window", {}, Type::kInt, "decoder layers resident on the device at once",
       "integer in [1, 4096]", {}, "engine", SF_SET { c.window = int(parse_int(v, w, 1, 4096)); },
       SF_GET { return std::to_string(c.window); }},
      {"gpu_memory", {}, Type::kString,
       "device memory for everything the run takes (engine, libraries, context); 0: the device",
       "a size: 24GiB, 24G, 24000MiB, or 0", {}, "engine",
       SF_SET { c.gpu_memory = v == "0" ? 0 : parse_size(v, w); },
       SF_GET { return std::to_string(c.gpu_memory); }},
      {"host_memory", {}, Type::kString,
       "host memory for everything the run takes (pinned state, checkpoints, data, margin); "
       "0: what the machine has available. `plan` checks against it alone, to plan for "
       "another machine",
       "a size: 96GiB, 96G, 98304MiB, or 0", {}, "engine",
       SF_SET { c.host_memory = v == "0" ? 0 : parse_size(v, w); },
       SF_GET { return std::to_string(c.host_memory); }},
      {"machine_file", {}, Type::kPath,
       "the cache of measured machine constants (PCIe, host memory, CPU AdamW, the layer's "
       "rate) that `plan` writes and `train` predicts its step time from; empty: "
       "$SLIDEFORMER_MACHINE_FILE, else ~/.cache/slideformer/machine.json",
       "a file path", {}, "engine", SF_SET { c.machine_file = v; },
       SF_GET { return c.machine_file.string(); }},
      {"micro_batch_tokens", {}, Type::kInt,
       "tokens per layer-major micro-batch (0: the largest that fits gpu_memory)",
       "integer in [0, 2^40]", {}, "engine",
       SF_SET { c.micro_batch_tokens = parse_int(v, w, 0, int64_t(1) << 40); },
       SF_GET { return std::to_string(c.micro_batch_tokens); }},
      {"device_optimizer", {}, Type::kEnum,
       "where the optimizer state lives: auto (on the device where gpu_memory leaves room "
       "after the window and micro-batch: the embedding's, the head's, then decoder layers' "
       "from the bottom, each where it fits), off (all on the host), all (the embedding's and "
       "head's on the device, whatever the budget)",
       "", kDeviceOptimizer, "engine",
       SF_SET { c.device_optimizer = pick(v, w, kDeviceOptimizer); },
       SF_GET { return c.device_optimizer; }},
      {"held_gradients", {}, Type::kInt,
       "without clipping: how many units (the head, then the top layers) keep their gradient "
       "in host memory (2 B/param) and are updated in forward order behind the others, so the "
       "CPU AdamW keeps working through the next forward; -1: the plan's choice (a quarter of "
       "the host-updated parameters; none where the host memory would not hold it, nor where "
       "the machine's cached constants predict it gains under 3 % with the AdamW hidden in the "
       "backward), 0: none (every gradient through the ring)",
       "integer in [-1, 2^20]", {}, "engine",
       SF_SET { c.held_gradients = parse_int(v, w, -1, int64_t(1) << 20); },
       SF_GET { return std::to_string(c.held_gradients); }},
      {"moments_later", {}, Type::kInt,
       "with clipping: how many host units, from the bottom up (the embedding, layer 0, 1, ...), "
       "get their update after the norm in two passes: the master weights at once (the next "
       "forward waits for them) and the Adam m and v through the next step, before the unit's "
       "next gradient (the same bits; no more memory); -1: the plan's choice (as many as the "
       "machine's cached constants predict fastest, where that gains 3 % or more; none without "
       "cached constants), 0: none",
       "integer in [-1, 2^20]", {}, "engine",
       SF_SET { c.moments_later = parse_int(v, w, -1, int64_t(1) << 20); },
       SF_GET { return std::to_string(c.moments_later); }},
      {"nvme_dir", {}, Type::kPath,
       "a directory on a local disk for the NVMe tier: the Adam m and v of the bottom layers "
       "(nvme_layers), and of some of those their fp32 master weights too (nvme_masters), live "
       "there in one private O_DIRECT file, read and written through io_uring behind the "
       "updates; empty: every state in host memory",
       "a directory path", {}, "engine", SF_SET { c.nvme_dir = v; },
       SF_GET { return c.nvme_dir.string(); }},
      {"nvme_layers", {}, Type::kInt,
       "with nvme_dir: how many decoder layers (from the bottom, past any whose optimizer state "
       "is on the GPU) keep their Adam m and v on the disk; -1: the fewest that bring the host "
       "memory within host_memory (or what the machine has)",
       "integer in [-1, 2^20]", {}, "engine",
       SF_SET { c.nvme_layers = parse_int(v, w, -1, int64_t(1) << 20); },
       SF_GET { return std::to_string(c.nvme_layers); }},
      {"nvme_masters", {}, Type::kInt,
       "with nvme_dir: of the layers on the disk, how many (from the bottom) keep their fp32 "
       "master weights there too (4 B/param less host memory for 12-16 B more disk traffic a "
       "step, against 8 B for 16 B for m and v); -1: none unless host_memory needs them after "
       "every layer's m and v, then the fewest",
       "integer in [-1, 2^20]", {}, "engine",
       SF_SET { c.nvme_masters = parse_int(v, w, -1, int64_t(1) << 20); },
       SF_GET { return std::to_string(c.nvme_masters); }},
      {"nvme_checkpoints", {}, Type::kEnum,
       "with nvme_dir: the layers' activation checkpoints on the disk too (written in the forward, "
       "read back for the backward through a few pinned slots): auto (where host_memory needs it, "
       "before any layer's state), on, off",
       "", kNvmeCheckpoints, "engine",
       SF_SET { c.nvme_checkpoints = pick(v, w, kNvmeCheckpoints); },
       SF_GET { return c.nvme_checkpoints; }},
      {"nvme_gds", {}, Type::kEnum,
       "with the checkpoints on NVMe: move them with GPUDirect Storage (cuFile, device memory to "
       "the disk) instead of pinned host slots and io_uring: auto (both measured in nvme_dir at "
       "start, the faster taken), on, off",
       "", kNvmeCheckpoints, "engine", SF_SET { c.nvme_gds = pick(v, w, kNvmeCheckpoints); },
       SF_GET { return c.nvme_gds; }},
      {"nvme_bandwidth", {}, Type::kFloat,
       "the disk's read and write rate in GB/s for the plan's prediction (`plan` on a "
       "hypothetical host: implies the tier without nvme_dir); 0: measured in nvme_dir",
       "number in [0, 1e4], optionally followed by GB/s", {}, "engine",
       SF_SET {
         std::string x = v;
         if (x.size() > 4 && x.substr(x.size() - 4) == "GB/s") x.resize(x.size() - 4);
         c.nvme_bandwidth = parse_number(x, w, 0, 1e4, false, false);
       },
       SF_GET { return num(c.nvme_bandwidth); }},
      {"trace", {}, Type::kPath, "write the engine's timeline here (Chrome/Perfetto JSON)",
       "a file path", {}, "engine", SF_SET { c.trace = v; },
       SF_GET { return c.trace.string(); }},
      {"backend", {}, Type::kEnum, "compute backend (auto: cuda when a GPU is visible)", "",
       kBackends, "engine", SF_SET { c.backend = pick(v, w, kBackends); },
       SF_GET { return c.backend; }},
      {"gpus", {}, Type::kInt,
       "GPUs of this host to train on, data parallel: each takes batch_size samples of every "
       "step (with packing, an equal share of its tokens); one host copy of the optimizer state; "
       "each gradient summed over the GPUs (NCCL) before its one copy to the host. With backend "
       "cpu: simulated devices",
       "integer in [1, 64]", {}, "engine", SF_SET { c.gpus = int(parse_int(v, w, 1, 64)); },
       SF_GET { return std::to_string(c.gpus); }},
  };
}

#undef SF_SET
#undef SF_GET
// clang-format on

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

const std::vector<OptionSpec>& train_options() {
  static const std::vector<OptionSpec> options = [] {
    auto o = make_options();
    for (auto& spec : o)
      if (spec.type == Type::kEnum) {
        for (const auto& ch : spec.choices)
          spec.accepted += (spec.accepted.empty() ? "" : "|") + ch;
      }
    return o;
  }();
  return options;
}

const OptionSpec* find_train_option(const std::string& key) {
  const std::string k = normalise(key);
  for (const auto& o : train_options()) {
    if (o.name == k) return &o;
    for (const auto& a : o.aliases)
      if (a == k) return &o;
  }
  return nullptr;
}

std::string nearest_train_option(const std::string& key) {
  const std::string k = normalise(key);
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& o : train_options()) {
    std::vector<std::string> names = o.aliases;
    names.insert(names.begin(), o.name);
    for (const auto& n : names) {
      const size_t d = edit_distance(k, n);
      if (d < best_d) best_d = d, best = n;
    }
  }
  return best;
}

void set_train_option(TrainConfig& c, const std::string& key, const std::string& value,
                      const std::string& where) {
  const OptionSpec* o = find_train_option(key);
  SF_CHECK(o, where, ": unknown option '", key, "'; did you mean '", nearest_train_option(key),
           "'? (slideformer train --help lists them all)");
  o->set(c, value, where);
}

std::string train_option_value(const OptionSpec& o, const TrainConfig& c) { return o.get(c); }

std::string config_to_yaml(const TrainConfig& c) {
  std::string out = "# the effective configuration of this run (slideformer train FILE reads it)\n";
  std::string group;
  for (const auto& o : train_options()) {
    if (o.group != group) out += "# " + (group = o.group) + "\n";
    std::string v = o.get(c);
    // Quoted as a YAML double-quoted scalar: paths and templates may hold any character.
    std::string q = "\"";
    for (char ch : v) {
      if (ch == '"' || ch == '\\') q += '\\';
      q += ch;
    }
    q += '"';
    const bool plain = o.type == Type::kInt || o.type == Type::kFloat || o.type == Type::kBool;
    out += o.name + ": " + (plain ? v : q) + "\n";
  }
  return out;
}

void validate_config(const TrainConfig& c) {
  SF_CHECK(!c.model_dir.empty(),
           "model_name_or_path is required: give --model DIR, or model_name_or_path: in the YAML");
  SF_CHECK(!c.data.empty(), "train_data is required: give --data FILE, or train_data: in the YAML");
  SF_CHECK(!c.output_dir.empty() || c.no_save,
           "output_dir is required (--output DIR, or output_dir: in the YAML); say --no-save to "
           "train without saving anything");
  SF_CHECK(!(c.no_save && c.save_steps > 0), "save_steps ", c.save_steps,
           " asks for checkpoints but no_save is set: drop one of them");
  SF_CHECK(c.enable_thinking == "auto" ||
               nlohmann::json::parse(c.chat_template_kwargs).count("enable_thinking") == 0,
           "enable_thinking and chat_template_kwargs both set enable_thinking: give one of them");
  SF_CHECK(c.resume_from_checkpoint != "auto" || !c.output_dir.empty(),
           "resume_from_checkpoint: auto looks in output_dir, which is not set");
  SF_CHECK(
      c.eval_data.empty() || c.val_size == 0,
      "eval_data and val_size both given: evaluate on the file or on a held-out part, not both");
  SF_CHECK(c.val_size < 1 || c.val_size == std::floor(c.val_size), "val_size ", c.val_size,
           " must be a fraction in (0, 1) or a whole number of samples");
  SF_CHECK(c.eval_steps == 0 || !c.eval_data.empty() || c.val_size > 0, "eval_steps ", c.eval_steps,
           " needs evaluation data: give eval_data or val_size");
  SF_CHECK(c.report_to != "tensorboard" || !c.output_dir.empty() || !c.logging_dir.empty(),
           "report_to: tensorboard needs output_dir or logging_dir for its event files");
  SF_CHECK(c.steps < 0 || c.warmup_steps <= c.steps, "warmup_steps ", c.warmup_steps,
           " exceeds max_steps ", c.steps, ": shorten the warmup or train longer");
  SF_CHECK(c.warmup_steps == 0 || c.warmup_ratio == 0,
           "warmup_steps and warmup_ratio both given: give one of them");
  SF_CHECK(c.gpus == 1 || c.nvme_dir.empty(), "gpus ", c.gpus, " with nvme_dir is not supported ",
           "yet: the NVMe tier serves one GPU; drop nvme_dir or train on one GPU");
  // Each splits an update one way only: say so rather than ignore the value.
  SF_CHECK(c.moments_later <= 0 || c.max_grad_norm > 0, "moments_later ", c.moments_later,
           " splits the update after the clipping norm, and max_grad_norm is 0 (no clipping): "
           "drop moments_later or set max_grad_norm");
  SF_CHECK(c.held_gradients <= 0 || c.max_grad_norm == 0, "held_gradients ", c.held_gradients,
           " applies without clipping (with max_grad_norm ", c.max_grad_norm,
           " every gradient is held for the norm): drop held_gradients or set max_grad_norm 0");
  // Token counts, positions and sequence bounds of a step are 32-bit in the engine's batch.
  const double tokens =
      double(c.batch_size) * double(c.gpus) * double(c.grad_accum) * double(c.cutoff_len);
  SF_CHECK(
      tokens <= double(std::numeric_limits<int32_t>::max()),
      "per_device_train_batch_size × gpus × gradient_accumulation_steps × cutoff_len = ", tokens,
      " tokens per optimizer step, more than a step can index (2^31 - 1): lower one of them");
  const double eval_tokens = double(c.eval_batch_size) * double(c.cutoff_len);
  SF_CHECK(eval_tokens <= double(std::numeric_limits<int32_t>::max()),
           "per_device_eval_batch_size × cutoff_len = ", eval_tokens,
           " tokens per evaluation batch, more than 2^31 - 1: lower one of them");
}

}  // namespace sf
