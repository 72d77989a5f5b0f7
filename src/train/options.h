// defines: sf::OptionSpec, train_options, find_train_option, nearest_train_option,
// set_train_option, train_option_value, config_to_yaml — the one table of `train` options that
// the YAML reader, the command line, --help and the effective configuration all use.
#pragma once

#include <string>
#include <vector>

#include "train/config.h"

namespace sf {

struct OptionSpec {
  enum class Type { kInt, kFloat, kBool, kString, kPath, kEnum, kList };
  std::string name;                  // canonical (HF / LLaMA-Factory name where there is one)
  std::vector<std::string> aliases;  // also accepted, with '-' or '_'
  Type type;
  std::string help;
  std::string accepted;              // the accepted values in words ("integer >= 1", "a|b|c")
  std::vector<std::string> choices;  // kEnum
  std::string group;
  // Parses `value` into `c` (throws sf::Error with `where` and the accepted values).
  void (*set)(TrainConfig& c, const std::string& value, const std::string& where);
  std::string (*get)(const TrainConfig& c);
};

const std::vector<OptionSpec>& train_options();

// By canonical name or alias; '-' and '_' are the same. nullptr when unknown.
const OptionSpec* find_train_option(const std::string& key);
// The closest canonical name or alias (edit distance), for "did you mean".
std::string nearest_train_option(const std::string& key);
// Sets `key` (name or alias) to `value`; unknown keys throw with the nearest name. `where` says
// where the value came from (a file and line, or a command-line argument) for the error.
void set_train_option(TrainConfig& c, const std::string& key, const std::string& value,
                      const std::string& where);
std::string train_option_value(const OptionSpec& o, const TrainConfig& c);

// Every option with its value, as YAML that `slideformer train FILE` reads back.
std::string config_to_yaml(const TrainConfig& c);

// The checks between options (each value was checked when set); throws naming the options.
void validate_config(const TrainConfig& c);

}  // namespace sf
