#include "data/bpe_model.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/error.h"
#include "data/unicode_utf8.h"

namespace sf::tok {

namespace {

constexpr uint64_t kEmpty = ~uint64_t(0);

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

std::atomic<uint64_t> g_next_uid{1};

// Per-thread word cache, one per model in use on that thread (a few at most).
struct WordCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map;
};
constexpr size_t kCacheModels = 4;
constexpr size_t kCacheEntries = 1 << 17;  // cleared when full
constexpr size_t kCacheMaxWord = 128;      // longer words are rare; not worth the memory

WordCache& thread_cache(uint64_t owner) {
  thread_local std::array<WordCache, kCacheModels> caches;
  thread_local size_t victim = 0;
  for (auto& c : caches)
    if (c.owner == owner) return c;
  WordCache& c = caches[victim];
  victim = (victim + 1) % kCacheModels;
  c.owner = owner;
  c.map.clear();
  return c;
}

}  // namespace

size_t StringHash::operator()(std::string_view s) const noexcept {
  // FNV-1a over 8-byte words: cheap for the short keys of a vocabulary.
  uint64_t h = 0xcbf29ce484222325ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
    h ^= h >> 29;
  }
  for (; i < s.size(); ++i) h = (h ^ uint8_t(s[i])) * 0x100000001b3ull;
  return size_t(mix(h));
}

void BpeModel::PairTable::build(const std::vector<std::pair<uint64_t, MergeValue>>& items) {
  size_t cap = 16;
  while (cap < items.size() * 2) cap <<= 1;
  keys.assign(cap, kEmpty);
  values.assign(cap, MergeValue{0, -1});
  mask = cap - 1;
  for (const auto& [k, v] : items) {
    uint64_t i = mix(k) & mask;
    while (keys[i] != kEmpty && keys[i] != k) i = (i + 1) & mask;
    keys[i] = k;
    values[i] = v;  // a repeated pair keeps the later rank, as Hugging Face's HashMap does
  }
}

const BpeModel::MergeValue* BpeModel::PairTable::find(int32_t a, int32_t b) const {
  uint64_t k = pair_key(a, b);
  uint64_t i = mix(k) & mask;
  while (keys[i] != kEmpty) {
    if (keys[i] == k) return &values[i];
    i = (i + 1) & mask;
  }
  return nullptr;
}

BpeModel::BpeModel(const Json& j, const std::string& path, const JsonSource& src)
    : uid_(g_next_uid.fetch_add(1)) {
  std::string type = src.type(j, path);
  if (type != "BPE") {
    src.fail(json_path(path, "type"), "unsupported model type \"" + type + "\" (supported: BPE)");
  }
  if (j.contains("dropout") && !j["dropout"].is_null() &&
      !(j["dropout"].is_number() && j["dropout"].get<double>() == 0.0)) {
    src.fail(json_path(path, "dropout"),
             "BPE dropout is not supported (encoding must be "
             "deterministic); set it to null");
  }
  auto opt_str = [&](const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::string();
    if (!it->is_string()) src.fail(json_path(path, key), "expected a string or null");
    return it->get<std::string>();
  };
  prefix_ = opt_str("continuing_subword_prefix");
  suffix_ = opt_str("end_of_word_suffix");
  ignore_merges_ = src.boolean(j, path, "ignore_merges", false);
  byte_fallback_ = src.boolean(j, path, "byte_fallback", false);
  fuse_unk_ = src.boolean(j, path, "fuse_unk", false);

  std::string vocab_path = json_path(path, "vocab");
  const Json& vocab = src.at(j, path, "vocab");
  if (!vocab.is_object()) src.fail(vocab_path, "expected an object {token: id}");
  vocab_.reserve(vocab.size() * 2);
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > INT32_MAX) {
      src.fail(vocab_path + "[\"" + it.key() + "\"]", "expected a non-negative integer id");
    }
    int64_t id = it.value().get<int64_t>();
    vocab_.emplace(it.key(), int32_t(id));
    max_id = std::max(max_id, id);
  }
  // The id table is dense: an id far past the entry count (a hand-edited 2147483647) would
  // allocate gigabytes for nothing. Hugging Face's vocabularies are dense (ids 0..n-1).
  const int64_t id_limit = 2 * int64_t(vocab.size()) + 65536;
  if (max_id >= id_limit)
    src.fail(vocab_path, sf::str_cat("id ", max_id, " is far beyond the vocabulary's ",
                                     vocab.size(), " entries (ids must stay below ", id_limit,
                                     "): is the file corrupt?"));
  id_to_token_.assign(size_t(max_id + 1), std::string());
  has_id_.assign(size_t(max_id + 1), 0);
  for (const auto& [tok, id] : vocab_) {
    id_to_token_[size_t(id)] = tok;
    has_id_[size_t(id)] = 1;
  }

  std::string unk = opt_str("unk_token");
  if (!unk.empty()) {
    unk_id_ = token_to_id(unk);
    if (unk_id_ < 0) src.fail(json_path(path, "unk_token"), "\"" + unk + "\" is not in the vocab");
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    byte_ids_[size_t(b)] = token_to_id(name);
  }
  small_char_ids_.assign(0x800, -1);
  if (prefix_.empty() && suffix_.empty()) {
    for (uint32_t cp = 0; cp < 0x800; ++cp) {
      std::string s;
      utf8::append(s, cp);
      small_char_ids_[cp] = token_to_id(s);
    }
  }

  std::string merges_path = json_path(path, "merges");
  const Json& merges = src.at(j, path, "merges");
  if (!merges.is_array()) src.fail(merges_path, "expected an array");
  std::vector<std::pair<uint64_t, MergeValue>> items;
  items.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const Json& m = merges[r];
    std::string a, b;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        src.fail(json_path(merges_path, r),
                 "expected \"left right\" with one space, got \"" + s + "\"");
      }
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      src.fail(json_path(merges_path, r), "expected \"left right\" or [\"left\", \"right\"]");
    }
    int32_t ia = token_to_id(a), ib = token_to_id(b);
    if (ia < 0) src.fail(json_path(merges_path, r), "token \"" + a + "\" is not in the vocab");
    if (ib < 0) src.fail(json_path(merges_path, r), "token \"" + b + "\" is not in the vocab");
    std::string merged = a + (prefix_.empty() || b.compare(0, prefix_.size(), prefix_) != 0
                                  ? b
                                  : b.substr(prefix_.size()));
    int32_t inew = token_to_id(merged);
    if (inew < 0) {
      src.fail(json_path(merges_path, r), "merged token \"" + merged + "\" is not in the vocab");
    }
    items.emplace_back(pair_key(ia, ib), MergeValue{uint32_t(r), inew});
  }
  merges_.build(items);
}

int32_t BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || size_t(id) >= id_to_token_.size() || !has_id_[size_t(id)]) return nullptr;
  return &id_to_token_[size_t(id)];
}

int32_t BpeModel::char_id(std::string_view ch, bool first, bool last) const {
  if (prefix_.empty() && suffix_.empty()) {
    if (ch.size() <= 2) {
      const char* p = ch.data();
      uint32_t cp = utf8::next(p);
      return small_char_ids_[cp];
    }
    return token_to_id(ch);
  }
  std::string s;
  if (!first) s += prefix_;
  s += ch;
  if (last) s += suffix_;
  return token_to_id(s);
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    int32_t id = token_to_id(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() > kCacheMaxWord) {
    merge_word(word, out);
    return;
  }
  WordCache& cache = thread_cache(uid_);
  auto it = cache.map.find(word);
  if (it != cache.map.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  size_t mark = out.size();
  merge_word(word, out);
  if (cache.map.size() >= kCacheEntries) cache.map.clear();
  cache.map.emplace(std::string(word), std::vector<int32_t>(out.begin() + long(mark), out.end()));
}

namespace {
struct Symbol {
  int32_t id;
  int32_t prev, next;
  uint32_t len;  // 0 once merged into its left neighbour
};
struct Merge {
  uint32_t rank;
  int32_t pos;
  int32_t new_id;
  // std::priority_queue pops the largest: lowest rank first, then leftmost.
  bool operator<(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};
}  // namespace

// Hugging Face's BPE::merge_word + Word::merge_all, step for step (including how stale queue
// entries are recognised), so ties and odd merge tables give the same tokens.
void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<Merge> heap_storage;
  symbols.clear();
  auto add = [&](int32_t id, uint32_t len) {
    int32_t n = int32_t(symbols.size());
    symbols.push_back({id, n - 1, -1, len});
    if (n > 0) symbols[size_t(n - 1)].next = n;
  };
  int32_t unk = -1;
  uint32_t unk_len = 0;
  const char* base = word.data();
  size_t i = 0, n = word.size();
  while (i < n) {
    size_t len = std::min<size_t>(utf8::char_len(uint8_t(base[i])), n - i);
    std::string_view ch = word.substr(i, len);
    int32_t id = char_id(ch, i == 0, i + len == n);
    i += len;
    if (id >= 0) {
      if (unk >= 0) {
        add(unk, unk_len);
        unk = -1;
      }
      add(id, uint32_t(len));
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : ch) all = all && byte_ids_[uint8_t(c)] >= 0;
      if (all) {
        // As in Hugging Face, a pending unk is not flushed before the byte tokens.
        for (char c : ch) add(byte_ids_[uint8_t(c)], 1);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (unk >= 0 && fuse_unk_) {
        unk_len += uint32_t(len);
      } else {
        if (unk >= 0) add(unk, unk_len);
        unk = unk_id_;
        unk_len = uint32_t(len);
      }
    }
  }
  if (unk >= 0) add(unk, unk_len);

  std::vector<Merge>& heap = heap_storage;
  heap.clear();
  auto push = [&](Merge m) {
    heap.push_back(m);
    std::push_heap(heap.begin(), heap.end());
  };
  for (size_t k = 0; k + 1 < symbols.size(); ++k) {
    if (const MergeValue* m = merges_.find(symbols[k].id, symbols[k + 1].id))
      heap.push_back({m->rank, int32_t(k), m->new_id});
  }
  std::make_heap(heap.begin(), heap.end());  // O(n): long SentencePiece "words" are whole texts
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end());
    Merge top = heap.back();
    heap.pop_back();
    Symbol& cur = symbols[size_t(top.pos)];
    if (cur.len == 0 || cur.next == -1) continue;
    int32_t right_pos = cur.next;
    Symbol& right = symbols[size_t(right_pos)];
    const MergeValue* m = merges_.find(cur.id, right.id);
    if (!m || m->new_id != top.new_id) continue;  // stale entry
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    right.len = 0;
    if (cur.next >= 0) symbols[size_t(cur.next)].prev = top.pos;
    if (cur.prev >= 0) {
      if (const MergeValue* pm = merges_.find(symbols[size_t(cur.prev)].id, cur.id))
        push({pm->rank, cur.prev, pm->new_id});
    }
    if (cur.next >= 0) {
      if (const MergeValue* nm = merges_.find(cur.id, symbols[size_t(cur.next)].id))
        push({nm->rank, top.pos, nm->new_id});
    }
  }
  for (const Symbol& s : symbols)
    if (s.len != 0) out.push_back(s.id);
}

}  // namespace sf::tok
