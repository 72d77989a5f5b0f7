#include "data/dataset.h"

#include <algorithm>
#include <iterator>

#include "core/error.h"
#include "core/input_file.h"

namespace sf {

using json = nlohmann::ordered_json;

DatasetFormat parse_dataset_format(const std::string& name) {
  static const std::pair<const char*, DatasetFormat> kNames[] = {
      {"auto", DatasetFormat::kAuto},         {"text", DatasetFormat::kText},
      {"alpaca", DatasetFormat::kAlpaca},     {"sharegpt", DatasetFormat::kShareGpt},
      {"messages", DatasetFormat::kMessages}, {"tokens", DatasetFormat::kTokens}};
  for (auto& [n, f] : kNames)
    if (name == n) return f;
  SF_FAIL("unknown dataset format '", name,
          "': use auto, text, alpaca, sharegpt, messages or tokens");
}

void Columns::set(const std::string& assignment) {
  auto eq = assignment.find('=');
  SF_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < assignment.size(), "column mapping '",
           assignment, "' must look like key=name, e.g. output=response");
  const std::string key = assignment.substr(0, eq), name = assignment.substr(eq + 1);
  std::pair<const char*, std::string*> fields[] = {
      {"text", &text},         {"instruction", &instruction},
      {"input", &input},       {"output", &output},
      {"system", &system},     {"history", &history},
      {"conversations", &conversations}, {"from", &from},
      {"value", &value},       {"messages", &messages},
      {"role", &role},         {"content", &content},
      {"input_ids", &input_ids}, {"labels", &labels}};
  for (auto& [k, field] : fields)
    if (key == k) {
      *field = name;
      return;
    }
  std::string keys;
  for (auto& [k, field] : fields) keys += std::string(keys.empty() ? "" : ", ") + k;
  SF_FAIL("unknown column key '", key, "' in '", assignment, "'; the keys are: ", keys);
}

DatasetFormat detect_format(const json& obj, const Columns& c) {
  if (obj.contains(c.input_ids)) return DatasetFormat::kTokens;
  if (obj.contains(c.messages)) return DatasetFormat::kMessages;
  if (obj.contains(c.conversations)) return DatasetFormat::kShareGpt;
  if (obj.contains(c.instruction)) return DatasetFormat::kAlpaca;
  if (obj.contains(c.text)) return DatasetFormat::kText;
  SF_FAIL("cannot tell the format: no \"", c.input_ids, "\", \"", c.messages, "\", \"",
          c.conversations, "\", \"", c.instruction, "\" or \"", c.text,
          "\" key (give --dataset-format, or map columns with --column key=name)");
}

namespace {

const std::string& string_field(const json& obj, const std::string& key, bool required,
                                const std::string& empty) {
  if (!obj.contains(key) || obj.at(key).is_null()) {
    SF_CHECK(!required, "missing \"", key, "\"");
    return empty;
  }
  SF_CHECK(obj.at(key).is_string(), "\"", key, "\" must be a string, found ",
           obj.at(key).type_name());
  return obj.at(key).get_ref<const std::string&>();
}

std::vector<int32_t> int_array(const json& obj, const std::string& key) {
  const json& a = obj.at(key);
  SF_CHECK(a.is_array(), "\"", key, "\" must be an array of integers");
  std::vector<int32_t> v;
  v.reserve(a.size());
  for (const json& x : a) {
    SF_CHECK(x.is_number_integer(), "\"", key, "\" holds a non-integer value (",
             x.type_name(), ")");
    const int64_t i = x.get<int64_t>();
    SF_CHECK(i >= -100 && i <= INT32_MAX, "\"", key, "\" holds an out-of-range value ", i);
    v.push_back(int32_t(i));
  }
  return v;
}

json message(const std::string& role, const std::string& content) {
  return json{{"role", role}, {"content", content}};
}

void add_system(json& msgs, const json& obj, const Columns& c) {
  static const std::string kEmpty;
  const std::string& sys = string_field(obj, c.system, false, kEmpty);
  if (!sys.empty()) msgs.push_back(message("system", sys));
}

Record alpaca(const json& obj, const Columns& c) {
  static const std::string kEmpty;
  Record r;
  r.kind = Record::Kind::kChat;
  r.messages = json::array();
  add_system(r.messages, obj, c);
  if (obj.contains(c.history) && !obj.at(c.history).is_null()) {
    const json& h = obj.at(c.history);
    SF_CHECK(h.is_array(), "\"", c.history, "\" must be a list of [instruction, response] pairs");
    for (const json& pair : h) {
      SF_CHECK(pair.is_array() && pair.size() == 2 && pair[0].is_string() && pair[1].is_string(),
               "\"", c.history, "\" must be a list of [instruction, response] string pairs");
      r.messages.push_back(message("user", pair[0]));
      r.messages.push_back(message("assistant", pair[1]));
    }
  }
  std::string prompt = string_field(obj, c.instruction, true, kEmpty);
  const std::string& input = string_field(obj, c.input, false, kEmpty);
  if (!input.empty()) prompt += "\n" + input;  // the Alpaca convention of LLaMA-Factory
  r.messages.push_back(message("user", prompt));
  r.messages.push_back(message("assistant", string_field(obj, c.output, true, kEmpty)));
  return r;
}

Record sharegpt(const json& obj, const Columns& c) {
  Record r;
  r.kind = Record::Kind::kChat;
  r.messages = json::array();
  add_system(r.messages, obj, c);
  SF_CHECK(obj.contains(c.conversations), "missing \"", c.conversations, "\"");
  const json& conv = obj.at(c.conversations);
  SF_CHECK(conv.is_array() && !conv.empty(), "\"", c.conversations,
           "\" must be a non-empty list of {\"", c.from, "\", \"", c.value, "\"} turns");
  static const std::string kEmpty;
  for (size_t i = 0; i < conv.size(); ++i) {
    SF_CHECK(conv[i].is_object(), "turn ", i, " of \"", c.conversations, "\" is not an object");
    // ShareGPT files written with OpenAI's keys ({"role", "content"} turns) are read as such.
    const bool openai_keys = !conv[i].contains(c.from) && conv[i].contains("role");
    const std::string& from = string_field(conv[i], openai_keys ? "role" : c.from, true, kEmpty);
    std::string role;
    if (from == "human" || from == "user") role = "user";
    else if (from == "gpt" || from == "assistant") role = "assistant";
    else if (from == "system") role = "system";
    else
      SF_FAIL("turn ", i, ": unknown speaker \"", from,
              "\" (use human/user, gpt/assistant or system)");
    r.messages.push_back(
        message(role, string_field(conv[i], openai_keys ? "content" : c.value, true, kEmpty)));
  }
  return r;
}

Record messages(const json& obj, const Columns& c) {
  Record r;
  r.kind = Record::Kind::kChat;
  r.messages = json::array();
  SF_CHECK(obj.contains(c.messages), "missing \"", c.messages, "\"");
  const json& msgs = obj.at(c.messages);
  SF_CHECK(msgs.is_array() && !msgs.empty(), "\"", c.messages,
           "\" must be a non-empty list of {\"", c.role, "\", \"", c.content, "\"} messages");
  static const std::string kEmpty;
  for (size_t i = 0; i < msgs.size(); ++i) {
    SF_CHECK(msgs[i].is_object(), "message ", i, " is not an object");
    json m = msgs[i];  // other keys (e.g. reasoning_content) go to the template as they are
    const std::string role = string_field(msgs[i], c.role, true, kEmpty);
    // The roles of OpenAI's format and of the templates we run (Llama 3.1's tool results come
    // as "ipython"); anything else is a typo a template would render silently.
    static const char* const kRoles[] = {"system",    "user",    "assistant", "tool",
                                         "developer", "ipython", "function"};
    SF_CHECK(std::find(std::begin(kRoles), std::end(kRoles), role) != std::end(kRoles), "message ",
             i, ": unknown role \"", role, "\" (use system, user, assistant or tool)");
    SF_CHECK(msgs[i].contains(c.content) && msgs[i].at(c.content).is_string(), "message ", i,
             ": \"", c.content, "\" must be a string");
    if (c.role != "role") m.erase(c.role);
    if (c.content != "content") m.erase(c.content);
    m["role"] = role;
    m["content"] = msgs[i].at(c.content);
    r.messages.push_back(std::move(m));
  }
  return r;
}

}  // namespace

Record parse_record(const json& obj, DatasetFormat format, const Columns& c) {
  SF_CHECK(obj.is_object(), "expected a JSON object, found ", obj.type_name());
  switch (format) {
    case DatasetFormat::kText: {
      Record r;
      static const std::string kEmpty;
      r.text = string_field(obj, c.text, true, kEmpty);
      SF_CHECK(!r.text.empty(), "\"", c.text, "\" is empty");
      return r;
    }
    case DatasetFormat::kAlpaca: return alpaca(obj, c);
    case DatasetFormat::kShareGpt: return sharegpt(obj, c);
    case DatasetFormat::kMessages: return messages(obj, c);
    case DatasetFormat::kTokens: {
      Record r;
      r.kind = Record::Kind::kTokens;
      SF_CHECK(obj.contains(c.input_ids), "missing \"", c.input_ids, "\"");
      r.ids = int_array(obj, c.input_ids);
      for (int32_t id : r.ids) SF_CHECK(id >= 0, "\"", c.input_ids, "\" holds a negative id ", id);
      if (obj.contains(c.labels)) {
        r.labels = int_array(obj, c.labels);
        SF_CHECK(r.labels.size() == r.ids.size(), "\"", c.labels, "\" has ", r.labels.size(),
                 " entries but \"", c.input_ids, "\" has ", r.ids.size());
      }
      return r;
    }
    case DatasetFormat::kAuto: return parse_record(obj, detect_format(obj, c), c);
  }
  SF_FAIL("internal: unknown dataset format");
}

std::vector<Record> read_dataset(const std::filesystem::path& file,
                                 const DatasetReadOptions& opt, DatasetStats* stats) {
  return read_dataset_text(read_input_file(file, "the dataset"), file, opt, stats);
}

std::vector<Record> read_dataset_text(const std::string& content,
                                      const std::filesystem::path& file,
                                      const DatasetReadOptions& opt, DatasetStats* stats) {
  DatasetStats local;
  DatasetStats& st = stats ? *stats : local;
  DatasetFormat format = opt.format;
  std::vector<Record> out;
  auto skip_or_fail = [&](const std::string& why, const char* what) {
    if (!opt.skip_malformed) SF_FAIL(why, " (or pass --skip-malformed to skip such ", what, ")");
    ++st.skipped;
    if (st.skipped_reasons.size() < 5) st.skipped_reasons.push_back(why);
  };
  auto take = [&](const json& obj, int64_t line, const char* unit) {
    std::string err;
    try {
      if (format == DatasetFormat::kAuto) format = detect_format(obj, opt.columns);
      Record r = parse_record(obj, format, opt.columns);
      r.line = line;
      out.push_back(std::move(r));
      ++st.records;
      return;
    } catch (const Error& e) {
      err = e.what();
    } catch (const nlohmann::json::exception& e) {  // a check above missed: still name the line
      err = json_error_text(e);
    }
    skip_or_fail(str_cat(file.string(), ":", unit, line, ": ", err), "records");
  };
  // A JSON array file is recognised by its first non-blank character.
  const size_t first = content.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && content[first] == '[') {
    // The array adds one level to each record's nesting.
    const json all = parse_json(content, file.string(), kMaxJsonDepth + 1);
    for (size_t i = 0; i < all.size(); ++i) take(all[i], int64_t(i + 1), "element ");
  } else {
    int64_t n = 0;
    for (size_t pos = 0; pos < content.size();) {
      size_t end = content.find('\n', pos);
      if (end == std::string::npos) end = content.size();
      const std::string_view line(content.data() + pos, end - pos);
      pos = end + 1;
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      json obj;
      try {
        obj = parse_json(line, str_cat(file.string(), ":", n));
      } catch (const Error& e) {
        skip_or_fail(e.what(), "lines");
        continue;
      }
      take(obj, n, "");
    }
  }
  SF_CHECK(!out.empty(), "the dataset ", file, " holds no usable record",
           st.skipped ? str_cat(" (", st.skipped, " skipped as malformed)") : std::string());
  return out;
}

}  // namespace sf
