// defines: sf::DatasetFormat, sf::Columns, sf::Record, read_dataset — the dataset files users
// bring (JSONL, or a JSON array), in the formats of the common fine-tuning tools, read into
// records: plain text, a conversation (messages with role/content, as chat templates take them),
// or tokens already made.
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sf {

enum class DatasetFormat { kAuto, kText, kAlpaca, kShareGpt, kMessages, kTokens };

// Parses "auto|text|alpaca|sharegpt|messages|tokens"; anything else is an error listing these.
DatasetFormat parse_dataset_format(const std::string& name);

// The column names of each format, remappable (e.g. --column output=response).
struct Columns {
  std::string text = "text";
  std::string instruction = "instruction", input = "input", output = "output",
              system = "system", history = "history";
  std::string conversations = "conversations", from = "from", value = "value";
  std::string messages = "messages", role = "role", content = "content";
  std::string input_ids = "input_ids", labels = "labels";
  // "key=name" sets one of the above; an unknown key is an error listing the keys.
  void set(const std::string& assignment);
};

struct Record {
  enum class Kind { kText, kChat, kTokens } kind = Kind::kText;
  std::string text;                     // kText
  nlohmann::ordered_json messages;      // kChat: [{"role": ..., "content": ...}, ...], key order kept
  std::vector<int32_t> ids, labels;     // kTokens (labels empty: same as ids)
  int64_t line = 0;                     // 1-based line (JSONL) or element (JSON array)
};

struct DatasetReadOptions {
  DatasetFormat format = DatasetFormat::kAuto;  // auto: decided from the first record's keys
  Columns columns;
  bool skip_malformed = false;  // skip (and count) malformed records instead of failing
};

struct DatasetStats {
  int64_t records = 0, skipped = 0;
  std::vector<std::string> skipped_reasons;  // the first few, for the log
};

// Reads a .jsonl file (one object per line, blank lines ignored) or a .json file holding an array
// of objects. A malformed record is an error naming the file, the line and the reason.
std::vector<Record> read_dataset(const std::filesystem::path& file,
                                 const DatasetReadOptions& options, DatasetStats* stats = nullptr);

// read_dataset of content already read (the tokenised cache hashes the same bytes it parses);
// `file` names it in errors.
std::vector<Record> read_dataset_text(const std::string& content,
                                      const std::filesystem::path& file,
                                      const DatasetReadOptions& options,
                                      DatasetStats* stats = nullptr);

// One object → Record in the given (not auto) format; throws sf::Error with the reason only.
Record parse_record(const nlohmann::ordered_json& obj, DatasetFormat format, const Columns& columns);

// The format whose key is present in obj (input_ids, messages, conversations, instruction, text).
DatasetFormat detect_format(const nlohmann::ordered_json& obj, const Columns& columns);

}  // namespace sf
