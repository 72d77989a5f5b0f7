#include "data/encode.h"

#include "core/error.h"

namespace sf {

using ojson = nlohmann::ordered_json;

LossMask parse_loss_mask(const std::string& name) {
  if (name == "assistant") return LossMask::kAssistant;
  if (name == "all") return LossMask::kAll;
  if (name == "last") return LossMask::kLastAssistant;
  SF_FAIL("unknown loss mask '", name, "': use assistant, all or last");
}

namespace {

ojson head(const ojson& messages, size_t n) {
  ojson out = ojson::array();
  for (size_t i = 0; i < n; ++i) out.push_back(messages[i]);
  return out;
}

// The work of finding the spans, charged as it is done (see kMaxLossMaskWorkBytes).
void charge_mask_work(size_t& work, size_t bytes, size_t turn) {
  work += bytes;
  SF_CHECK(work <= kMaxLossMaskWorkBytes, "assistant turn ", turn, ": finding the loss mask of ",
           "this conversation takes more than ", kMaxLossMaskWorkBytes,
           " bytes of prefix renders and tokenisation (kMaxLossMaskWorkBytes in ",
           "src/data/encode.h; it grows as turns² × length): use --loss-mask last (the last turn ",
           "only) or all, or split the conversation");
}

// Token counts of prefixes text[0, chars), each checked to be a prefix of the whole
// conversation's ids: BPE may merge across a boundary, and then no token boundary exists where
// the turn starts or ends. Encoding every prefix from 0 made a conversation of n turns O(n^2)
// (1600 messages: > 60 s). Added tokens such as <|im_end|> cut the text into parts that are
// encoded independently, so a prefix is the ids up to the last such cut (a checkpoint, verified
// once) plus the encoding of the text after it; a mismatch falls back to encoding from 0,
// charged to the conversation's work budget.
class PrefixTokens {
 public:
  PrefixTokens(const std::string& full, const std::vector<int32_t>& ids, const Tokenizer& tok,
               size_t& work)
      : full_(full), ids_(ids), tok_(tok), work_(work) {}

  int64_t count(size_t chars, size_t turn) {
    const std::string_view all(full_);
    // The last checkpoint at or before chars.
    size_t k = cuts_.size();
    while (k > 0 && cuts_[k - 1].chars > chars) --k;
    if (k > 0) {
      const Cut c = cuts_[k - 1];
      std::vector<int32_t> tail = tok_.encode_continuation(all.substr(c.chars, chars - c.chars));
      if (matches(c.tokens, tail)) {
        add_checkpoint(c, chars, tail);
        add_verified(Cut{chars, c.tokens + tail.size()});
        return int64_t(c.tokens + tail.size());
      }
    }
    charge_mask_work(work_, chars, turn);
    std::vector<int32_t> p = tok_.encode(all.substr(0, chars), false);
    SF_CHECK(matches(0, p), "assistant turn ", turn,
             ": the text before or after it does not tokenise as a prefix ",
             "of the conversation (a token spans the turn boundary), so its loss mask cannot be ",
             "found; use --loss-mask all");
    add_checkpoint(Cut{0, 0}, chars, p);
    add_verified(Cut{chars, p.size()});
    return int64_t(p.size());
  }

 private:
  struct Cut {
    size_t chars, tokens;  // full_[0, chars) encodes to ids_[0, tokens)
  };
  // A boundary just verified (full_[0, chars) is ids_[0, tokens), each piece checked against
  // ids_) is a checkpoint too: where no added token cuts the text (a template without special
  // tokens), the next prefix continues from here instead of being encoded from 0. A tail that
  // matches ids_ from a verified boundary ends on a token boundary of the conversation, which is
  // the reference's count whenever the reference (the prefix encoded from 0) is a prefix of ids_.
  void add_verified(const Cut& c) {
    if (c.chars > 0 && (cuts_.empty() || cuts_.back().chars < c.chars)) cuts_.push_back(c);
  }
  bool matches(size_t at, const std::vector<int32_t>& p) const {
    return at + p.size() <= ids_.size() && std::equal(p.begin(), p.end(), ids_.begin() + at);
  }
  // `tail` = the ids of full_[from.chars, chars), verified: the last cutting added token in it
  // becomes a checkpoint, after checking that the text up to it encodes to the ids up to it.
  void add_checkpoint(const Cut& from, size_t chars, const std::vector<int32_t>& tail) {
    std::string content;
    for (size_t q = tail.size(); q-- > 0;) {
      if (!tok_.cuts_after(tail[q], &content)) continue;
      const size_t at = std::string_view(full_).substr(0, chars).rfind(content);
      if (at == std::string::npos || at < from.chars) return;
      const Cut c{at + content.size(), from.tokens + q + 1};
      if (!cuts_.empty() && cuts_.back().chars >= c.chars) return;
      const std::string_view seg = std::string_view(full_).substr(from.chars, c.chars - from.chars);
      std::vector<int32_t> p = from.chars == 0 ? tok_.encode(seg, false)
                                               : tok_.encode_continuation(seg);
      if (p.size() == q + 1 && matches(from.tokens, p)) cuts_.push_back(c);
      return;
    }
  }

  const std::string& full_;
  const std::vector<int32_t>& ids_;
  const Tokenizer& tok_;
  size_t& work_;
  std::vector<Cut> cuts_;  // increasing
};

}  // namespace

std::vector<TokenSpan> assistant_spans(const ojson& messages, const std::vector<int32_t>& ids,
                                       const Tokenizer& tok, const ChatTemplate& chat,
                                       bool last_only, const ojson& none) {
  const std::string full = chat.render(messages, false, none);
  std::vector<TokenSpan> spans;
  size_t work = 0;
  PrefixTokens prefix(full, ids, tok, work);
  size_t first = 0;
  if (last_only) {
    first = messages.size();
    for (size_t k = messages.size(); k-- > 0;)
      if (messages[k].value("role", "") == "assistant") {
        first = k;
        break;
      }
  }
  {
    // Refused before the work, where it can be foreseen: each assistant turn k renders two
    // prefixes of about (k + 1) / n of the whole conversation.
    const double n = double(messages.size());
    double estimate = 0;
    int64_t turns = 0;
    for (size_t k = 0; k < messages.size(); ++k)
      if (k >= first && messages[k].value("role", "") == "assistant") {
        estimate += 2 * double(full.size()) * double(k + 1) / n;
        ++turns;
      }
    SF_CHECK(estimate <= double(kMaxLossMaskWorkBytes), "finding the loss mask of this ",
             "conversation (", messages.size(), " messages, ", turns, " assistant turns, ",
             full.size(), " bytes rendered) takes about ", int64_t(estimate),
             " bytes of prefix renders, more than ", kMaxLossMaskWorkBytes,
             " (kMaxLossMaskWorkBytes in src/data/encode.h; it grows as turns² × length): use ",
             "--loss-mask last (the last turn only) or all, or split the conversation");
  }
  for (size_t k = first; k < messages.size(); ++k) {
    if (messages[k].value("role", "") != "assistant") continue;
    // The prompt up to the assistant's first token: the conversation so far plus the generation
    // prompt. Templates that refuse an empty conversation start the first turn at 0.
    std::string prompt;
    if (k > 0) prompt = chat.render(head(messages, k), true, none);
    charge_mask_work(work, prompt.size(), k);
    SF_CHECK(full.compare(0, prompt.size(), prompt) == 0, "assistant turn ", k,
             ": the template renders the conversation before this turn differently from the ",
             "whole conversation, so the turn cannot be located; use --loss-mask all or last");
    // This turn rendered on its own: content, then whatever closes the turn (e.g. <|im_end|>\n).
    const std::string upto = chat.render(head(messages, k + 1), false, none);
    charge_mask_work(work, upto.size(), k);
    std::string content = messages[k].value("content", "");
    // Templates may write the content trimmed (Llama 3's `| trim`).
    if (upto.find(content, prompt.size()) == std::string::npos) {
      const size_t b = content.find_first_not_of(" \t\n\r");
      content = b == std::string::npos ? "" : content.substr(b, content.find_last_not_of(" \t\n\r") - b + 1);
    }
    // Located in both renderings separately: a template may rewrite earlier turns (Qwen3 drops
    // the reasoning of turns before the last user query), so offsets differ between the two.
    const size_t c_upto = upto.find(content, prompt.size());
    const size_t c_full = full.find(content, prompt.size());
    SF_CHECK(c_upto != std::string::npos && c_full != std::string::npos, "assistant turn ", k,
             ": its content does not appear in the rendered conversation");
    // What closes the turn: the text after the content that the turn's own rendering and the
    // whole conversation share (templates may append a generation prompt after the last turn).
    const size_t content_end = c_full + content.size();
    size_t close = 0;
    for (size_t i = c_upto + content.size(), j = content_end;
         i < upto.size() && j < full.size() && upto[i] == full[j]; ++i, ++j)
      ++close;
    TokenSpan s;
    s.begin = prefix.count(prompt.size(), k);
    const int64_t content_tokens = prefix.count(content_end, k);
    s.end = prefix.count(content_end + close, k);
    // The turn ends at its end-of-turn token (<|eot_id|>, <|im_end|>, </s>): the first special
    // token after the content. What follows it (a newline, a next header) is not trained on.
    for (int64_t i = content_tokens; i < s.end; ++i)
      if (tok.is_special(ids[size_t(i)])) {
        s.end = i + 1;
        break;
      }
    spans.push_back(s);
  }
  return spans;
}

Sample encode_record(const Record& r, const Tokenizer* tok, const ChatTemplate* chat,
                     const EncodeOptions& opt, bool* truncated) {
  Sample out;
  switch (r.kind) {
    case Record::Kind::kTokens:
      out.ids = r.ids;
      out.labels = r.labels.empty() ? r.ids : r.labels;
      break;
    case Record::Kind::kText:
      SF_CHECK(tok, "text needs a tokenizer: give --tokenizer DIR (a folder with tokenizer.json)");
      out.ids = tok->encode(r.text, opt.text_add_special_tokens);
      if (opt.text_append_eos && tok->eos_id() >= 0 &&
          (out.ids.empty() || out.ids.back() != tok->eos_id()))
        out.ids.push_back(tok->eos_id());
      out.labels = out.ids;
      break;
    case Record::Kind::kChat: {
      SF_CHECK(tok, "a conversation needs a tokenizer: give --tokenizer DIR");
      SF_CHECK(chat, "a conversation needs a chat template: the tokenizer folder has none; pass ",
               "--chat-template llama3|llama2|chatml or a template file");
      // As apply_chat_template(tokenize=True): the template writes BOS itself where it wants one.
      out.ids = tok->encode(chat->render(r.messages, false, opt.template_kwargs), false);
      if (opt.mask == LossMask::kAll) {
        out.labels = out.ids;
        break;
      }
      out.labels.assign(out.ids.size(), -100);
      const bool last = opt.mask == LossMask::kLastAssistant;
      std::vector<TokenSpan> spans =
          assistant_spans(r.messages, out.ids, *tok, *chat, last, opt.template_kwargs);
      for (const TokenSpan& s : spans)
        for (int64_t i = s.begin; i < s.end; ++i) out.labels[size_t(i)] = out.ids[size_t(i)];
      break;
    }
  }
  const bool chunked_later = r.kind == Record::Kind::kText && opt.text_chunk;
  if (int64_t(out.ids.size()) > opt.cutoff_len && !chunked_later) {
    out.ids.resize(size_t(opt.cutoff_len));
    out.labels.resize(size_t(opt.cutoff_len));
    if (truncated) *truncated = true;
  }
  return out;
}

}  // namespace sf
