// Loading tokenizer.json + tokenizer_config.json into sf::Tokenizer::Impl.
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/input_file.h"
#include "data/tokenizer_impl.h"

namespace sf {

namespace {

using tok::Json;
using tok::json_path;
using tok::JsonSource;

Json parse_tokenizer_json(std::string_view text, const std::string& file) {
  check_json_depth(text, file);  // a Sequence nested 50k deep: an error, not a stack overflow
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range (1e888)
    SF_FAIL(file, ": not valid JSON: ", e.what());
  }
}

std::string read_file(const std::filesystem::path& p) {
  return read_input_file(p, "the tokenizer file");
}

// ByteLevel steps under `j` (a pre-tokenizer, Sequences walked): each maps a byte to up to two,
// so stacked ones grow a text exponentially; Hugging Face's tokenizers have one at most.
int count_byte_level(const Json& j) {
  if (!j.is_object()) return 0;
  auto t = j.find("type");
  if (t != j.end() && *t == "ByteLevel") return 1;
  int n = 0;
  auto arr = j.find("pretokenizers");
  if (arr != j.end() && arr->is_array())
    for (const Json& e : *arr) n += count_byte_level(e);
  return n;
}

// Post-processor → ids before/after the sequence. Returns false when it adds nothing.
bool parse_post_processor(const Json& j, const std::string& path, const JsonSource& src,
                          std::vector<int32_t>& prefix, std::vector<int32_t>& suffix) {
  if (j.is_null()) return false;
  std::string type = src.type(j, path);
  if (type == "ByteLevel") return false;
  if (type == "TemplateProcessing") {
    std::string single_path = json_path(path, "single");
    const Json& single = src.at(j, path, "single");
    const Json& specials = src.at(j, path, "special_tokens");
    if (!single.is_array()) src.fail(single_path, "expected an array");
    bool seen_sequence = false;
    for (size_t i = 0; i < single.size(); ++i) {
      std::string ip = json_path(single_path, i);
      const Json& piece = single[i];
      if (piece.is_object() && piece.contains("Sequence")) {
        if (seen_sequence) src.fail(ip, "more than one Sequence in the single template");
        seen_sequence = true;
      } else if (piece.is_object() && piece.contains("SpecialToken")) {
        std::string name = src.str(piece["SpecialToken"], json_path(ip, "SpecialToken"), "id");
        std::string sp = json_path(path, "special_tokens");
        if (!specials.is_object() || !specials.contains(name)) {
          src.fail(sp, "no entry for \"" + name + "\" used by the single template");
        }
        const Json& ids = src.at(specials[name], json_path(sp, name.c_str()), "ids");
        for (const Json& id : ids) {
          if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX ||
              (id.is_number_unsigned() && id.get<uint64_t>() > INT32_MAX))
            src.fail(json_path(sp, name.c_str()), "ids must be integers in [0, 2147483647]");
          (seen_sequence ? suffix : prefix).push_back(id.get<int32_t>());
        }
      } else {
        src.fail(ip, "expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
      }
    }
    return true;
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    auto tok_id = [&](const char* key) {
      const Json& v = src.at(j, path, key);
      if (!v.is_array() || v.size() != 2 || !v[1].is_number_integer() || v[1].get<int64_t>() < 0 ||
          v[1].get<int64_t>() > INT32_MAX ||
          (v[1].is_number_unsigned() && v[1].get<uint64_t>() > INT32_MAX))
        src.fail(json_path(path, key), "expected [\"token\", id] with an id in [0, 2147483647]");
      return v[1].get<int32_t>();
    };
    prefix.push_back(tok_id("cls"));
    suffix.push_back(tok_id("sep"));
    return true;
  }
  if (type == "Sequence") {
    std::string pp = json_path(path, "processors");
    const Json& arr = src.at(j, path, "processors");
    if (!arr.is_array()) src.fail(pp, "expected an array");
    bool any = false;
    for (size_t i = 0; i < arr.size(); ++i) {
      std::vector<int32_t> p, s;
      if (parse_post_processor(arr[i], json_path(pp, i), src, p, s)) {
        any = true;
        prefix.insert(prefix.begin(), p.begin(), p.end());
        suffix.insert(suffix.end(), s.begin(), s.end());
      }
    }
    return any;
  }
  src.fail(json_path(path, "type"),
           "unsupported post-processor type \"" + type +
               "\" (supported: TemplateProcessing, ByteLevel, RobertaProcessing, "
               "BertProcessing, Sequence)");
}

// tokenizer_config.json's bos_token / eos_token: a string, {"content": ...} or null.
std::string config_token(const Json& cfg, const char* key) {
  if (!cfg.is_object() || !cfg.contains(key)) return {};
  const Json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return {};
}

}  // namespace

bool Tokenizer::present(const std::filesystem::path& dir) {
  return std::filesystem::exists(dir / "tokenizer.json") ||
         std::filesystem::exists(dir / "tokenizer.model");
}

Tokenizer Tokenizer::load(const std::filesystem::path& dir) {
  std::filesystem::path tj = dir / "tokenizer.json", cj = dir / "tokenizer_config.json";
  // SentencePiece's own format is not read here (docs/decisions.md, "SentencePiece-only
  // folders"): transformers converts it to the tokenizer.json that every other tool reads.
  SF_CHECK(std::filesystem::exists(tj) || !std::filesystem::exists(dir / "tokenizer.model"),
           dir.string(), " holds tokenizer.model (a SentencePiece model) but no tokenizer.json, ",
           "and only tokenizer.json is read. Write it next to the model once with transformers: ",
           "python3 -c \"from transformers import AutoTokenizer; d='", dir.string(),
           "'; AutoTokenizer.from_pretrained(d).save_pretrained(d)\" (needs the sentencepiece ",
           "and protobuf packages), or give tokenizer: DIR, a folder with the model's ",
           "tokenizer.json");
  SF_CHECK(std::filesystem::exists(tj), tj.string(),
           ": not found (pass the Hugging Face model directory that holds tokenizer.json)");
  std::string config = std::filesystem::exists(cj) ? read_file(cj) : std::string();
  return from_json(read_file(tj), config, tj.string());
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json,
                               const std::string& source) {
  auto impl = std::make_shared<Impl>();
  impl->source = source;
  JsonSource src{source};
  Json j = parse_tokenizer_json(tokenizer_json, source);
  if (!j.is_object()) src.fail("", "expected a JSON object");
  Json cfg;
  std::filesystem::path cfg_name =
      std::filesystem::path(source).parent_path() / "tokenizer_config.json";
  if (!config_json.empty()) cfg = parse_tokenizer_json(config_json, cfg_name.string());

  if (j.contains("truncation") && !j["truncation"].is_null())
    src.fail("truncation", "truncation in tokenizer.json is not supported; set it to null");
  if (j.contains("padding") && !j["padding"].is_null())
    src.fail("padding", "padding in tokenizer.json is not supported; set it to null");

  impl->model.emplace(src.at(j, "", "model"), "model", src);
  impl->max_id = impl->model->max_id();
  impl->normalizer = tok::make_normalizer(j.value("normalizer", Json()), "normalizer", src);
  if (int n = count_byte_level(j.value("pre_tokenizer", Json())); n > 1)
    src.fail("pre_tokenizer", sf::str_cat(n, " ByteLevel pre-tokenizers: each maps a byte to up ",
                                          "to two, so stacked ones grow the text 2^", n,
                                          " times; a tokenizer has one at most"));
  impl->pre_tokenizer =
      tok::make_pre_tokenizer(j.value("pre_tokenizer", Json()), "pre_tokenizer", src);
  impl->decoder = tok::make_decoder(j.value("decoder", Json()), "decoder", src);

  // Added tokens: specials first, then the others, as Hugging Face orders its tries.
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    const Json& arr = j["added_tokens"];
    if (!arr.is_array()) src.fail("added_tokens", "expected an array");
    int64_t max_added = -1;
    for (size_t i = 0; i < arr.size(); ++i) {
      std::string p = json_path("added_tokens", i);
      const Json& a = arr[i];
      tok::AddedToken t;
      t.content = src.str(a, p, "content");
      const Json& id = src.at(a, p, "id");
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
        src.fail(json_path(p, "id"), "expected a non-negative 32-bit integer");
      t.id = id.get<int32_t>();
      t.special = src.boolean(a, p, "special", false);
      t.single_word = src.boolean(a, p, "single_word", false);
      t.lstrip = src.boolean(a, p, "lstrip", false);
      t.rstrip = src.boolean(a, p, "rstrip", false);
      t.normalized = src.boolean(a, p, "normalized", !t.special);
      if (t.content.empty()) continue;
      // The id Hugging Face gives it (AddedVocabulary::add_tokens): an existing token keeps its
      // id; a new one goes after the model vocabulary and the added tokens. The file's id is
      // what HF wrote, so the two differ only in hand-edited files; HF's wins, as in HF.
      if (auto it = impl->added_by_content.find(t.content); it != impl->added_by_content.end()) {
        t.id = it->second;
      } else if (int32_t mid = impl->model->token_to_id(t.content); mid >= 0) {
        t.id = mid;
      } else {
        int64_t count = impl->model->vocab_count(), next = count;
        if (max_added >= 0 && (max_added >= count || count == 0)) next = max_added + 1;
        t.id = int32_t(next);
      }
      max_added = std::max<int64_t>(max_added, t.id);
      if (auto it = impl->added_by_id.find(t.id); it != impl->added_by_id.end()) {
        const tok::AddedToken& old = impl->added[it->second];
        if (old.content == t.content && old.special == t.special && old.lstrip == t.lstrip &&
            old.rstrip == t.rstrip && old.single_word == t.single_word &&
            old.normalized == t.normalized) {
          continue;  // an exact duplicate is ignored
        }
      }
      impl->added_by_id[t.id] = impl->added.size();
      impl->added_by_content[t.content] = t.id;
      if (t.special) impl->special_contents.insert(t.content);
      impl->max_id = std::max<int64_t>(impl->max_id, t.id);
      impl->added.push_back(t);
    }
  }
  std::vector<tok::AddedToken> raw, norm;
  std::vector<std::string> raw_pat, norm_pat;
  for (int pass = 0; pass < 2; ++pass) {
    for (const tok::AddedToken& t : impl->added) {
      if (t.special != (pass == 0)) continue;
      if (t.normalized) {
        std::string s = t.content;
        if (impl->normalizer) impl->normalizer->apply(s);
        norm.push_back(t);
        norm_pat.push_back(s);
      } else {
        raw.push_back(t);
        raw_pat.push_back(t.content);
      }
    }
  }
  impl->raw_matcher.build(std::move(raw), raw_pat);
  impl->normalized_matcher.build(std::move(norm), norm_pat);

  bool says = parse_post_processor(j.value("post_processor", Json()), "post_processor", src,
                                   impl->prefix_ids, impl->suffix_ids);
  Tokenizer result{impl};
  impl->bos_str = config_token(cfg, "bos_token");
  impl->eos_str = config_token(cfg, "eos_token");
  impl->bos = impl->bos_str.empty() ? -1 : result.token_to_id(impl->bos_str);
  impl->eos = impl->eos_str.empty() ? -1 : result.token_to_id(impl->eos_str);
  if (!says && cfg.is_object()) {
    auto flag = [&](const char* key) {
      return cfg.contains(key) && cfg[key].is_boolean() && cfg[key].get<bool>();
    };
    if (flag("add_bos_token")) {
      if (impl->bos < 0)
        SF_FAIL(cfg_name.string(), ": add_bos_token is true but bos_token \"", impl->bos_str,
                "\" is not a token");
      impl->prefix_ids.push_back(impl->bos);
    }
    if (flag("add_eos_token")) {
      if (impl->eos < 0)
        SF_FAIL(cfg_name.string(), ": add_eos_token is true but eos_token \"", impl->eos_str,
                "\" is not a token");
      impl->suffix_ids.push_back(impl->eos);
    }
  }
  if (impl->bos < 0 && impl->prefix_ids.size() == 1) {
    impl->bos = impl->prefix_ids[0];
    impl->bos_str = result.id_to_token(impl->bos);
  }
  if (impl->eos < 0 && impl->suffix_ids.size() == 1) {
    impl->eos = impl->suffix_ids[0];
    impl->eos_str = result.id_to_token(impl->eos);
  }
  for (int32_t id : impl->prefix_ids) impl->max_id = std::max<int64_t>(impl->max_id, id);
  for (int32_t id : impl->suffix_ids) impl->max_id = std::max<int64_t>(impl->max_id, id);
  return result;
}

}  // namespace sf
