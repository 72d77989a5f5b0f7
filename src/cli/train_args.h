// defines: parse_train_args, train_help — `slideformer train [run.yaml] [key=value ...]
// [--key value ...]` through CLI11 and the option table of train/options.h.
#pragma once

#include <string>
#include <vector>

#include "train/config.h"

namespace sf {

constexpr const char* kSlideformerVersion = "0.2.0";

struct TrainArgs {
  TrainConfig config;
  bool exit_now = false;  // --help or --version was answered
};

// Precedence: defaults < the YAML file < key=value and --key value on the command line (a key
// given twice on the command line is an error). Every value is checked, then validate_config.
// `out` receives --help and --version.
// `for_plan`: for `slideformer plan`, which saves nothing: output_dir may be left out.
TrainArgs parse_train_args(const std::vector<std::string>& argv, std::ostream& out,
                           bool for_plan = false);

// Every option: names, aliases, accepted values, default, what it does.
std::string train_help();
// The same as a Markdown reference (`slideformer train --help-markdown > docs/config.md`).
std::string train_help_markdown();

}  // namespace sf
