// defines: sf::golden::GenerateCase, generate_cases — the expected greedy decodings of
// tests/golden/data/generate.json (made by tests/golden/make_generate.py with transformers'
// generate), for the CPU and CUDA generate tests. Header-only: test support.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "golden_case.h"

namespace sf::golden {

struct GenerateCase {
  std::string model;  // the fixture case: tests/golden/data/<model>
  std::vector<int32_t> prompt, new_ids;
  int64_t max_new_tokens = 0;
  // At each new token: the fp32 reference's top-2 logit margin and largest |logit| at that step.
  std::vector<double> margins, max_abs_logits;
};

inline std::vector<GenerateCase> generate_cases() {
  std::ifstream f(data_dir() / "generate.json");
  const nlohmann::json j = nlohmann::json::parse(f);
  std::vector<GenerateCase> out;
  for (const std::string& name : case_names()) {
    for (const auto& c : j.at("cases").at(name)) {
      GenerateCase g;
      g.model = name;
      g.prompt = c.at("prompt").get<std::vector<int32_t>>();
      g.new_ids = c.at("new_ids").get<std::vector<int32_t>>();
      g.max_new_tokens = c.at("max_new_tokens").get<int64_t>();
      g.margins = c.at("margins").get<std::vector<double>>();
      g.max_abs_logits = c.at("max_abs_logits").get<std::vector<double>>();
      out.push_back(std::move(g));
    }
  }
  return out;
}

}  // namespace sf::golden
