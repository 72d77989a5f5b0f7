// defines: sf::LossMask, sf::EncodeOptions, encode_record — a dataset record to training tokens
// and labels. Conversations go through the chat template as written, then the tokenizer as
// transformers' apply_chat_template does (special tokens matched, no extra BOS); the loss mask
// is found by rendering the conversation prefix by prefix.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/chat_template.h"
#include "data/dataset.h"
#include "data/sample.h"
#include "data/tokenizer.h"

namespace sf {

enum class LossMask {
  kAssistant,      // every assistant turn: its content and its end-of-turn token (default)
  kAll,            // every token
  kLastAssistant,  // the last assistant turn only
};
LossMask parse_loss_mask(const std::string& name);  // assistant | all | last

struct EncodeOptions {
  LossMask mask = LossMask::kAssistant;
  int64_t cutoff_len = 2048;  // longer samples are truncated; the mask stays aligned
  // Plain-text records longer than cutoff_len are left whole for prepare_samples to cut into
  // cutoff_len pieces, as a .txt file is (else truncated like the rest).
  bool text_chunk = false;
  bool text_add_special_tokens = true;  // plain text: the post-processor's BOS/EOS
  bool text_append_eos = true;          // plain text: end with EOS so the model learns to stop
  // Keyword options of the chat template, as apply_chat_template(**kwargs) takes them (e.g.
  // {"enable_thinking": false}); every render of a conversation sees them.
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
};


// A Record into ids and labels. `tok` may be null for token records, `chat` when the record is
// not a conversation.
// Errors (a template that refuses the conversation, a prefix that does not tokenise as a prefix)
// carry the reason; the caller adds file and line.
// *truncated (optional) says whether cutoff_len cut it.
Sample encode_record(const Record& r, const Tokenizer* tok, const ChatTemplate* chat,
                     const EncodeOptions& opt, bool* truncated = nullptr);

// [begin, end) token ranges of each assistant turn of `messages` within
// tokenize(render(messages)); exposed for tests.
struct TokenSpan {
  int64_t begin = 0, end = 0;
};
// The work of finding one conversation's spans, in bytes rendered (each turn renders its prefix
// twice) plus bytes tokenised from the start (a prefix that no added token such as <|im_end|>
// cuts is encoded whole). It grows as turns² × message length: 1600 messages of ~50 bytes take
// ~80 MiB (a few seconds on the 2-core CI machine). Estimated from the whole conversation's
// render before any prefix is rendered, then counted as it is done; past the limit the
// conversation is refused, naming the limit (and the turn, when counted), instead of running for
// minutes (use --loss-mask last, or all).
inline constexpr size_t kMaxLossMaskWorkBytes = size_t{256} << 20;
// `last_only`: only the last assistant turn's span (--loss-mask last: two renders, not 2n).
std::vector<TokenSpan> assistant_spans(
    const nlohmann::ordered_json& messages, const std::vector<int32_t>& ids, const Tokenizer& tok,
    const ChatTemplate& chat, bool last_only = false,
    const nlohmann::ordered_json& template_kwargs = nlohmann::ordered_json::object());

}  // namespace sf
