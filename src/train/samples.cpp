#include "train/samples.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>

#include "core/error.h"
#include "data/chat_template.h"
#include "data/pipeline.h"
#include "data/tokenizer.h"
#include "train/config_file.h"
#include "train/data.h"

namespace sf {
namespace {

bool is_dataset(const std::filesystem::path& p) {
  auto ext = p.extension().string();
  return ext == ".jsonl" || ext == ".json";
}

// The chat template, when one can be found: a missing one is an error only when a conversation
// needs it (encode_record says so).
std::optional<ChatTemplate> find_template(const TrainConfig& c, const std::filesystem::path& dir,
                                          const Tokenizer* tok) {
  if (c.chat_template.empty() && dir.empty()) return std::nullopt;
  try {
    return resolve_chat_template(c.chat_template, dir, tok);
  } catch (const Error&) {
    if (!c.chat_template.empty()) throw;  // the user's choice must load
    return std::nullopt;
  }
}

std::vector<Sample> load_file(const TrainConfig& c, const std::filesystem::path& file,
                              const ModelSpec& spec, const Tokenizer* tok,
                              const std::filesystem::path& tok_dir, std::ostream& log) {
  check_readable_file(file, "the data file");
  if (!is_dataset(file)) {
    // Byte ids trained into a real vocabulary would be garbage: the stand-in is for 256-token
    // (byte-level test) models only.
    SF_CHECK(
        tok || spec.vocab == 256, "the model in ", c.model_dir.string(), " has no tokenizer.json ",
        "and a vocabulary of ", spec.vocab, " tokens, so the text ", file.string(),
        " cannot be tokenised: give tokenizer: DIR (a folder with the model's tokenizer.json), ",
        "or pre-tokenised JSONL ({\"input_ids\": [...]})");
    if (!tok) log << "note: no tokenizer.json: using the byte-level stand-in tokenizer\n";
    return load_text_samples(file, c.cutoff_len, spec.vocab, tok);
  }
  std::optional<ChatTemplate> chat = find_template(c, tok_dir, tok);
  DataConfig d;
  d.file = file;
  d.tokenizer_dir = tok_dir;
  d.vocab = spec.vocab;
  d.read.format = parse_dataset_format(c.dataset_format);
  for (const std::string& col : c.columns) d.read.columns.set(col);
  d.read.skip_malformed = c.skip_malformed;
  d.encode.mask = parse_loss_mask(c.loss_mask);
  d.encode.cutoff_len = c.cutoff_len;
  d.encode.text_chunk = c.text_overflow == "chunk";
  d.encode.template_kwargs = nlohmann::ordered_json::parse(c.chat_template_kwargs);
  if (c.enable_thinking != "auto")
    d.encode.template_kwargs["enable_thinking"] = c.enable_thinking == "true";
  if (c.cache && !c.output_dir.empty()) d.cache_dir = c.output_dir / "tokenized-cache";
  DataStats st;
  std::vector<Sample> s = prepare_samples(d, tok, chat ? &*chat : nullptr, &st);
  log << "data " << file.string() << ": " << s.size() << " samples, " << st.tokens << " tokens"
      << (st.from_cache ? " (from the tokenised cache " + st.cache_file.string() + ")" : "");
  if (st.truncated) log << ", " << st.truncated << " truncated to " << c.cutoff_len;
  if (st.chunked)
    log << ", " << st.chunked << " text records longer than " << c.cutoff_len << " cut into "
        << st.chunks << " samples";
  if (st.skipped_malformed) log << ", " << st.skipped_malformed << " malformed skipped";
  if (st.no_loss) log << ", " << st.no_loss << " without labels dropped";
  log << "\n";
  return s;
}

void show_first(const std::vector<Sample>& s, const std::filesystem::path& file,
                const Tokenizer* tok, std::ostream& log) {
  if (s.empty()) return;
  int64_t loss = 0;
  for (int32_t l : s[0].labels) loss += l != -100;
  log << "sample 1 of " << file.string() << " (" << s[0].ids.size() << " tokens, " << loss
      << " carry the loss, between « and »):\n"
      << render_sample(s[0], tok) << "\n";
}

}  // namespace

std::string render_sample(const Sample& s, const Tokenizer* tok) {
  std::string out;
  size_t i = 0;
  while (i < s.ids.size()) {
    const bool loss = s.labels[i] != -100;
    size_t j = i;
    while (j < s.ids.size() && (s.labels[j] != -100) == loss) ++j;
    const std::span<const int32_t> ids(s.ids.data() + i, j - i);
    std::string text;
    if (tok) {
      text = tok->decode(ids, false);
    } else {
      for (int32_t id : ids) text += (text.empty() ? "" : " ") + std::to_string(id);
      if (i > 0) text = " " + text;
    }
    out += loss ? "«" + text + "»" : text;
    i = j;
  }
  return out;
}

void split_validation(std::vector<Sample>& train, std::vector<Sample>& eval, double val_size,
                      uint64_t seed) {
  const size_t n = train.size();
  const size_t k = val_size < 1 ? size_t(std::ceil(val_size * double(n))) : size_t(val_size);
  SF_CHECK(k >= 1 && k < n, "val_size ", val_size, " holds out ", k, " of ", n,
           " samples: at least one must be held out and one must stay for training");
  std::vector<size_t> idx(n);
  for (size_t i = 0; i < n; ++i) idx[i] = i;
  std::mt19937_64 rng(seed);
  std::shuffle(idx.begin(), idx.end(), rng);
  std::vector<bool> held(n, false);
  for (size_t i = 0; i < k; ++i) held[idx[i]] = true;
  std::vector<Sample> keep;
  for (size_t i = 0; i < n; ++i) (held[i] ? eval : keep).push_back(std::move(train[i]));
  train = std::move(keep);
}

RunSamples load_run_samples(const TrainConfig& c, const ModelSpec& spec, std::ostream& log) {
  RunSamples r;
  std::optional<Tokenizer> tok;
  if (!c.tokenizer_dir.empty()) {
    tok = Tokenizer::load(c.tokenizer_dir);
    r.tokenizer_dir = c.tokenizer_dir;
  } else if (Tokenizer::present(c.model_dir)) {
    tok = Tokenizer::load(c.model_dir);
    r.tokenizer_dir = c.model_dir;
  }
  const Tokenizer* t = tok ? &*tok : nullptr;
  r.train = load_file(c, c.data, spec, t, r.tokenizer_dir, log);
  if (c.show_sample) show_first(r.train, c.data, t, log);
  SF_CHECK(!r.train.empty(), "train_data ", c.data.string(), " holds no sample with a loss (every ",
           "record empty, skipped or fully masked): there is nothing to train on; check the file ",
           "and loss_mask");
  if (!c.eval_data.empty()) {
    r.eval = load_file(c, c.eval_data, spec, t, r.tokenizer_dir, log);
    if (c.show_sample) show_first(r.eval, c.eval_data, t, log);
    SF_CHECK(!r.eval.empty(), "eval_data ", c.eval_data.string(), " holds no sample with a loss");
  } else if (c.val_size > 0) {
    split_validation(r.train, r.eval, c.val_size, c.seed);
    log << "val_size " << c.val_size << ": " << r.eval.size() << " samples held out for "
        << "evaluation, " << r.train.size() << " for training\n";
  }
  return r;
}

}  // namespace sf
