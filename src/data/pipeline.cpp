#include "data/pipeline.h"

#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/input_file.h"
#include "core/thread_pool.h"
#include "io/atomic_file.h"

namespace sf {
namespace {

constexpr char kMagic[8] = {'S', 'F', 'T', 'O', 'K', 'S', '0', '2'};

// FNV-1a, 64-bit: not cryptographic, only a cache key.
struct Hasher {
  uint64_t h = 1469598103934665603ull;
  void bytes(const void* p, size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ c[i]) * 1099511628211ull;
  }
  void str(const std::string& s) {
    uint64_t n = s.size();
    bytes(&n, 8);
    bytes(s.data(), s.size());
  }
  void file(const std::filesystem::path& p) { str(read_input_file(p, "the tokenizer file")); }
};

}  // namespace

uint64_t samples_cache_key(const DataConfig& cfg, const Tokenizer* tok, const ChatTemplate* chat) {
  return samples_cache_key(cfg, read_input_file(cfg.file, "the dataset"), tok, chat);
}

uint64_t samples_cache_key(const DataConfig& cfg, const std::string& data, const Tokenizer* tok,
                           const ChatTemplate* chat) {
  Hasher h;
  h.str("slideformer-samples-v2");
  h.str(data);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
    if (std::filesystem::exists(cfg.tokenizer_dir / name)) h.file(cfg.tokenizer_dir / name);
  h.str(str_cat(tok ? tok->vocab_size() : -1, "/", cfg.vocab));
  h.str(chat ? chat->source() : std::string("<no template>"));
  const auto& c = cfg.read.columns;
  for (const std::string* s : {&c.text, &c.instruction, &c.input, &c.output, &c.system,
                               &c.history, &c.conversations, &c.from, &c.value, &c.messages,
                               &c.role, &c.content, &c.input_ids, &c.labels})
    h.str(*s);
  h.str(str_cat(int(cfg.read.format), "/", cfg.read.skip_malformed, "/", int(cfg.encode.mask), "/",
                cfg.encode.cutoff_len, "/", cfg.encode.text_add_special_tokens, "/",
                cfg.encode.text_append_eos, "/", cfg.encode.template_kwargs.dump(), "/",
                cfg.encode.text_chunk));
  return h.h;
}

void write_samples_cache(const std::filesystem::path& file, const std::vector<Sample>& samples) {
  std::filesystem::create_directories(file.parent_path());
  AtomicFile f(file);
  Hasher sum;  // over every byte before it
  auto put = [&](const void* p, size_t n) {
    f.write(p, n);
    sum.bytes(p, n);
  };
  put(kMagic, 8);
  uint64_t n = samples.size();
  put(&n, 8);
  for (const Sample& s : samples) {
    uint32_t len = uint32_t(s.ids.size());
    put(&len, 4);
    put(s.ids.data(), len * 4);
    put(s.labels.data(), len * 4);
  }
  f.write(&sum.h, 8);
  f.finish();
  f.rename_to_final();
}

std::vector<Sample> read_samples_cache(const std::filesystem::path& file) {
  const std::string data = read_input_file(file, "the tokenised cache");
  return parse_samples_cache(data, file);
}

std::vector<Sample> parse_samples_cache(std::string_view data, const std::filesystem::path& file) {
  const auto bad = [&](const char* why) {
    SF_FAIL("the tokenised cache ", file.string(), " is corrupt (", why,
            "): delete it and the next run rebuilds it");
  };
  size_t pos = 0;
  auto get = [&](void* p, size_t n) {
    if (data.size() - pos < n) bad("truncated");
    std::memcpy(p, data.data() + pos, n);
    pos += n;
  };
  if (data.size() < 24 || std::memcmp(data.data(), kMagic, 8) != 0)
    bad("bad magic: not a cache file of this version");
  Hasher sum;
  sum.bytes(data.data(), data.size() - 8);
  uint64_t stored = 0;
  std::memcpy(&stored, data.data() + data.size() - 8, 8);
  if (stored != sum.h) bad("checksum mismatch");
  data.remove_suffix(8);
  pos = 8;
  uint64_t n = 0;
  get(&n, 8);
  if (n > data.size() / 4) bad("impossible sample count");
  std::vector<Sample> out(n);
  for (Sample& s : out) {
    uint32_t len = 0;
    get(&len, 4);
    if (uint64_t(len) * 8 > data.size() - pos) bad("truncated");
    s.ids.resize(len);
    s.labels.resize(len);
    get(s.ids.data(), size_t(len) * 4);
    get(s.labels.data(), size_t(len) * 4);
  }
  if (pos != data.size()) bad("trailing bytes");
  return out;
}

std::vector<Sample> prepare_samples(const DataConfig& cfg, const Tokenizer* tok,
                                    const ChatTemplate* chat, DataStats* stats) {
  DataStats local;
  DataStats& st = stats ? *stats : local;
  // Read once: the cache key and the records come from the same bytes (a file replaced between
  // hashing and parsing must not train on samples "from the cache" of other content).
  const std::string data = read_input_file(cfg.file, "the dataset");
  if (!cfg.cache_dir.empty()) {
    char name[64];
    std::snprintf(name, sizeof name, "tokenized-%016llx.bin",
                  static_cast<unsigned long long>(samples_cache_key(cfg, data, tok, chat)));
    st.cache_file = cfg.cache_dir / name;
    if (std::filesystem::exists(st.cache_file)) {
      std::vector<Sample> s = read_samples_cache(st.cache_file);
      st.from_cache = true;
      st.records = int64_t(s.size());
      for (const Sample& x : s) st.tokens += int64_t(x.ids.size());
      return s;
    }
  }
  DatasetStats ds;
  std::vector<Record> records = read_dataset_text(data, cfg.file, cfg.read, &ds);
  st.records = ds.records;
  st.skipped_malformed = ds.skipped;
  std::vector<Sample> encoded(records.size());
  std::vector<char> truncated(records.size(), 0);
  std::vector<std::string> errors(records.size());
  parallel_for(int64_t(records.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      try {
        bool t = false;
        encoded[size_t(i)] = encode_record(records[size_t(i)], tok, chat, cfg.encode, &t);
        truncated[size_t(i)] = t;
      } catch (const Error& err) {
        errors[size_t(i)] = err.what();
      }
    }
  });
  std::vector<Sample> out;
  for (size_t i = 0; i < records.size(); ++i) {
    if (!errors[i].empty()) {
      const std::string why = str_cat(cfg.file.string(), ":", records[i].line, ": ", errors[i]);
      SF_CHECK(cfg.read.skip_malformed, why, " (or pass --skip-malformed to skip such records)");
      ++st.skipped_malformed;
      continue;
    }
    for (int32_t id : encoded[i].ids)
      SF_CHECK(id >= 0 && id < cfg.vocab, cfg.file.string(), ":", records[i].line, ": token id ",
               id, " is outside the model's vocabulary of ", cfg.vocab,
               " (does the tokenizer belong to this model?)");
    for (int32_t l : encoded[i].labels)
      SF_CHECK(l == -100 || (l >= 0 && l < cfg.vocab), cfg.file.string(), ":", records[i].line,
               ": label ", l, " is neither -100 nor inside the vocabulary of ", cfg.vocab);
    st.truncated += truncated[i];
    bool any = false;
    for (int32_t l : encoded[i].labels) any |= l != -100;
    if (!any || encoded[i].ids.size() < 2) {
      ++st.no_loss;
      continue;
    }
    const size_t cut = size_t(cfg.encode.cutoff_len);
    if (encoded[i].ids.size() <= cut) {
      st.tokens += int64_t(encoded[i].ids.size());
      out.push_back(std::move(encoded[i]));
      continue;
    }
    // A long text record (encode left it whole): pieces of cutoff_len, the last of >= 2 tokens,
    // as load_text_samples cuts a .txt file.
    ++st.chunked;
    const Sample& whole = encoded[i];
    for (size_t b = 0; b + 1 < whole.ids.size(); b += cut) {
      const size_t e = std::min(whole.ids.size(), b + cut);
      Sample piece;
      piece.ids.assign(whole.ids.begin() + long(b), whole.ids.begin() + long(e));
      piece.labels.assign(whole.labels.begin() + long(b), whole.labels.begin() + long(e));
      st.tokens += int64_t(piece.ids.size());
      ++st.chunks;
      out.push_back(std::move(piece));
    }
  }
  SF_CHECK(!out.empty(), "the dataset ", cfg.file, " gives no sample with a label to learn from (",
           st.no_loss, " without any)");
  if (!st.cache_file.empty()) write_samples_cache(st.cache_file, out);
  return out;
}

}  // namespace sf
