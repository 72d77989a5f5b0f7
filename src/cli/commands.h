// defines: the slideformer subcommands (each parses its own options and returns an exit code).
#pragma once

#include <string>
#include <vector>

namespace sf {

int cmd_train(const std::vector<std::string>& argv);
int cmd_plan(const std::vector<std::string>& argv);  // cli/cmd_plan.cpp
int cmd_init_model(const std::vector<std::string>& argv);
int cmd_logits(const std::vector<std::string>& argv);
int cmd_tokenize(const std::vector<std::string>& argv);  // cli/cmd_tokenize.cpp
int cmd_generate(const std::vector<std::string>& argv);  // cli/cmd_generate.cpp

}  // namespace sf
