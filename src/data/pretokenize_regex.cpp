#include "data/pretokenize_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/error.h"
#include "data/unicode_utf8.h"

namespace sf {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
};

namespace {

// Per-thread matching state: a JIT stack large enough for long runs (a 100k-space line) and
// a match-data block. PCRE2 requires neither to be shared between threads at once.
struct ThreadMatchState {
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_data* data = nullptr;
  ThreadMatchState() {
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr);
    pcre2_jit_stack_assign(context, nullptr, stack);
    data = pcre2_match_data_create(32, nullptr);  // ovector big enough for any pattern we use
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(data);
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
  }
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

Regex::Regex(const std::string& pattern, bool literal, const std::string& where)
    : pattern_(pattern), impl_(std::make_unique<Impl>()) {
  int err = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2_LITERAL refuses PCRE2_UCP (which only changes \w, \d, \s: nothing in a literal).
  uint32_t options = PCRE2_UTF | PCRE2_NO_UTF_CHECK | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  never_matches_ = literal && pattern.empty();  // Hugging Face: an empty string matches nothing
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                              &err, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    SF_FAIL(where, ": cannot compile the regex \"", pattern, "\" at offset ", offset, ": ",
            reinterpret_cast<const char*>(msg),
            " (tokenizer regexes are compiled by PCRE2; report the pattern if it is valid in "
            "Oniguruma)");
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
  if (impl_ && impl_->code) pcre2_code_free(impl_->code);
}

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  ThreadMatchState& st = thread_state();
  auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  if (never_matches_) return;
  size_t n = text.size(), pos = 0;
  bool have_last = false;
  size_t last_end = 0;
  while (pos <= n) {
    int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, n, pos, 0, st.data, st.context)
                        : pcre2_match(impl_->code, subject, n, pos, PCRE2_NO_UTF_CHECK, st.data,
                                      st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof(msg));
      SF_FAIL("tokenizer: regex \"", pattern_, "\" failed on a text of ", n,
              " bytes: ", reinterpret_cast<const char*>(msg));
    }
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    size_t b = ov[0], e = ov[1];
    // The onig crate's find_iter, which Hugging Face uses: an empty match right where the last
    // match ended is skipped (the search moves on one character); other empty matches count
    // (they split: (?=X) with Isolated cuts before every X).
    if (e == b && have_last && last_end == e) {
      if (pos >= n) break;
      pos += utf8::char_len(static_cast<unsigned char>(text[pos]));
      continue;
    }
    out.emplace_back(b, e);
    have_last = true;
    last_end = e;
    pos = e;
  }
}

std::string Regex::replace_all(std::string_view text, std::string_view with) const {
  std::vector<std::pair<size_t, size_t>> m;
  find_all(text, m);
  std::string out;
  out.reserve(text.size());
  size_t prev = 0;
  for (auto [b, e] : m) {
    out.append(text.substr(prev, b - prev));
    out.append(with);
    prev = e;
    // The bound of data/tokenizer_pipeline.h (kMaxGrowth): an empty-matching pattern replaced by
    // a long content would multiply the text.
    if (out.size() > 8 * text.size() + 4096)
      SF_FAIL("tokenizer: replacing the regex \"", pattern_, "\" by a ", with.size(),
              "-byte content grows a text of ", text.size(),
              " bytes more than 8 times: fix the Replace step of tokenizer.json");
  }
  out.append(text.substr(prev));
  return out;
}

}  // namespace sf
