// defines: write_report, svg_line_chart — OUTPUT/report.html: one self-contained page (no script,
// no external file) with SVG plots drawn here from OUTPUT/metrics.jsonl (loss and eval loss,
// learning rate, grad norm, tokens/s, memory in use), the run's summary, the engine's plan and
// the configuration.
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace sf {

struct ChartSeries {
  std::string name, color;
  std::vector<std::pair<double, double>> points;  // (step, value)
};

// An <svg> of the series on shared axes (min/max labels, with the digits that tell them apart),
// or a note when there is no point. `y_from_zero`: the axis starts at 0 (amounts such as memory).
std::string svg_line_chart(const std::string& title, const std::vector<ChartSeries>& series,
                           bool y_from_zero = false);

// Reads OUTPUT/metrics.jsonl (every step of the run, a resumed one's too) and writes
// OUTPUT/report.html atomically. `summary` lines go in a list at the top; `plan` is the engine's
// plan as `train` prints it.
void write_report(const std::filesystem::path& output, const std::string& config_yaml,
                  const std::string& plan, const std::vector<std::string>& summary);

std::string html_escape(const std::string& s);

}  // namespace sf
