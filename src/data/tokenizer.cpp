// sf::Tokenizer: encode (added-token split → normalize → pre-tokenize → BPE → post-process),
// decode and vocabulary queries.
#include "data/tokenizer.h"

#include <algorithm>

#include "core/error.h"
#include "core/thread_pool.h"
#include "data/tokenizer_impl.h"
#include "data/unicode_utf8.h"

namespace sf {

namespace {
// Below this many pre-tokens a text is encoded on the calling thread.
constexpr size_t kParallelItems = 8192;
constexpr size_t kItemsPerTask = 2048;
}  // namespace

void Tokenizer::Impl::split(std::string_view text, std::string& buf, std::vector<Item>& items,
                            bool at_start) const {
  std::vector<tok::AddedMatcher::Segment> raw, norm;
  raw_matcher.split(text, raw);
  std::string seg;
  tok::Pieces pieces;
  for (const auto& r : raw) {
    if (r.id >= 0) {
      items.push_back({0, 0, r.id});
      continue;
    }
    seg.assign(text.substr(r.begin, r.end - r.begin));
    if (normalizer) normalizer->apply(seg);
    norm.clear();
    normalized_matcher.split(seg, norm);
    for (const auto& s : norm) {
      if (s.id >= 0) {
        items.push_back({0, 0, s.id});
        continue;
      }
      pieces.buf.assign(seg, s.begin, s.end - s.begin);
      pieces.spans.assign(1, {0, uint32_t(s.end - s.begin), at_start && r.begin == 0 && s.begin == 0});
      if (pre_tokenizer) pre_tokenizer->apply(pieces);
      SF_CHECK(buf.size() + pieces.buf.size() < UINT32_MAX,
               "tokenizer: text too large (over 4 GiB after normalization); split it");
      auto base = uint32_t(buf.size());
      buf += pieces.buf;
      for (const auto& sp : pieces.spans) {
        if (sp.len) items.push_back({base + sp.off, sp.len, -1});
      }
    }
  }
}

void Tokenizer::Impl::encode_items(const std::string& buf, const std::vector<Item>& items,
                                   size_t begin, size_t end, std::vector<int32_t>& out) const {
  std::string_view all(buf);
  for (size_t i = begin; i < end; ++i) {
    const Item& it = items[i];
    if (it.id >= 0)
      out.push_back(it.id);
    else
      model->encode_word(all.substr(it.off, it.len), out);
  }
}

std::vector<int32_t> Tokenizer::encode_continuation(std::string_view text) const {
  SF_CHECK(text.size() < UINT32_MAX, "tokenizer: text too large");
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::repair(text);
    text = repaired;
  }
  std::string buf;
  std::vector<Impl::Item> items;
  impl_->split(text, buf, items, false);
  std::vector<int32_t> ids;
  impl_->encode_items(buf, items, 0, items.size(), ids);
  return ids;
}

bool Tokenizer::cuts_after(int32_t id, std::string* content) const {
  auto it = impl_->added_by_id.find(id);
  if (it == impl_->added_by_id.end()) return false;
  const tok::AddedToken& t = impl_->added[it->second];
  if (t.normalized || t.rstrip || t.single_word) return false;
  if (content) *content = t.content;
  return true;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  SF_CHECK(text.size() < UINT32_MAX, "tokenizer: text of ", text.size(),
           " bytes is over the 4 GiB limit; split it");
  std::string repaired;
  if (!utf8::is_valid(text)) {
    repaired = utf8::repair(text);
    text = repaired;
  }
  std::string buf;
  std::vector<Impl::Item> items;
  impl_->split(text, buf, items);

  std::vector<int32_t> ids;
  if (add_special_tokens) ids = impl_->prefix_ids;
  if (items.size() < kParallelItems) {
    ids.reserve(ids.size() + items.size() * 2);
    impl_->encode_items(buf, items, 0, items.size(), ids);
  } else {
    // Pre-token boundaries are safe cut points: every pre-token is encoded on its own.
    size_t tasks = (items.size() + kItemsPerTask - 1) / kItemsPerTask;
    std::vector<std::vector<int32_t>> parts(tasks);
    parallel_for(int64_t(tasks), 1, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        size_t lo = size_t(t) * kItemsPerTask, hi = std::min(items.size(), lo + kItemsPerTask);
        impl_->encode_items(buf, items, lo, hi, parts[size_t(t)]);
      }
    });
    size_t total = ids.size();
    for (const auto& p : parts) total += p.size();
    ids.reserve(total + impl_->suffix_ids.size());
    for (const auto& p : parts) ids.insert(ids.end(), p.begin(), p.end());
  }
  if (add_special_tokens) ids.insert(ids.end(), impl_->suffix_ids.begin(), impl_->suffix_ids.end());
  return ids;
}

std::vector<std::vector<int32_t>> Tokenizer::encode_batch(const std::vector<std::string>& texts,
                                                          bool add_special_tokens) const {
  std::vector<std::vector<int32_t>> out(texts.size());
  // Interleaved small tasks balance texts of very different lengths.
  constexpr int64_t kTextsPerTask = 16;
  int64_t tasks = (int64_t(texts.size()) + kTextsPerTask - 1) / kTextsPerTask;
  parallel_for(tasks, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      size_t lo = size_t(t * kTextsPerTask);
      size_t hi = std::min(texts.size(), lo + size_t(kTextsPerTask));
      for (size_t i = lo; i < hi; ++i) out[i] = encode(texts[i], add_special_tokens);
    }
  });
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string* t = nullptr;
    auto a = impl_->added_by_id.find(id);
    if (a != impl_->added_by_id.end())
      t = &impl_->added[a->second].content;
    else
      t = impl_->model->id_to_token(id);
    if (!t) continue;  // unknown id: skipped, as Hugging Face does
    if (skip_special_tokens && impl_->special_contents.count(*t)) continue;
    tokens.push_back(*t);
  }
  if (!impl_->decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  impl_->decoder->apply(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->added_by_content.find(token);
  if (it != impl_->added_by_content.end()) return it->second;
  return impl_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  auto a = impl_->added_by_id.find(id);
  if (a != impl_->added_by_id.end()) return impl_->added[a->second].content;
  const std::string* t = impl_->model->id_to_token(id);
  return t ? *t : std::string();
}

int64_t Tokenizer::vocab_size() const { return impl_->max_id + 1; }

bool Tokenizer::is_special(int32_t id) const {
  auto a = impl_->added_by_id.find(id);
  return a != impl_->added_by_id.end() && impl_->added[a->second].special;
}

int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
const std::string& Tokenizer::bos_token() const { return impl_->bos_str; }
const std::string& Tokenizer::eos_token() const { return impl_->eos_str; }

}  // namespace sf
