#include "train/report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"

namespace sf {
namespace {

constexpr double kW = 640, kH = 240, kLeft = 64, kRight = 16, kTop = 28, kBottom = 32;

std::string num(double v, int digits = 4) {
  std::ostringstream os;
  os.precision(digits);
  os << v;
  return os.str();
}

// Enough significant digits that the two ends of an axis [lo, hi] read differently (0.1739 GiB
// and 0.1741 GiB both printed "0.1739" at 4).
int axis_digits(double lo, double hi) {
  const double scale = std::max(std::fabs(lo), std::fabs(hi));
  if (!(hi > lo) || scale == 0) return 4;
  return std::clamp(int(std::ceil(std::log10(scale / (hi - lo)))) + 2, 4, 12);
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string svg_line_chart(const std::string& title, const std::vector<ChartSeries>& series,
                           bool y_from_zero) {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& s : series)
    for (auto [x, y] : s.points)
      if (std::isfinite(y)) {
        x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
      }
  std::ostringstream o;
  o << "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " << kW << " " << kH
    << "\" width=\"" << kW << "\" height=\"" << kH << "\" role=\"img\" aria-label=\""
    << html_escape(title) << "\">\n<text x=\"" << kLeft << "\" y=\"18\" class=\"title\">"
    << html_escape(title) << "</text>\n";
  if (!std::isfinite(x0)) {
    o << "<text x=\"" << kW / 2 << "\" y=\"" << kH / 2
      << "\" text-anchor=\"middle\">no data</text>\n</svg>\n";
    return o.str();
  }
  if (y_from_zero) y0 = std::min(y0, 0.0);
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0)
    y0 -= std::max(1e-12, std::fabs(y0) * 0.05), y1 += std::max(1e-12, std::fabs(y1) * 0.05);
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x0) / (x1 - x0) * pw; };
  auto py = [&](double y) { return kTop + (1 - (y - y0) / (y1 - y0)) * ph; };
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" class=\"frame\"/>\n";
  const int digits = axis_digits(y0, y1);
  o << "<text x=\"" << kLeft - 6 << "\" y=\"" << kTop + 10 << "\" text-anchor=\"end\">"
    << num(y1, digits) << "</text>\n<text x=\"" << kLeft - 6 << "\" y=\"" << kTop + ph
    << "\" text-anchor=\"end\">" << num(y0, digits) << "</text>\n<text x=\"" << kLeft << "\" y=\"" << kH - 10 << "\">step " << num(x0)
    << "</text>\n<text x=\"" << kLeft + pw << "\" y=\"" << kH - 10 << "\" text-anchor=\"end\">step "
    << num(x1) << "</text>\n";
  double legend_x = kLeft + pw;
  for (auto it = series.rbegin(); it != series.rend(); ++it) {
    o << "<text x=\"" << legend_x << "\" y=\"18\" text-anchor=\"end\" style=\"fill:" << it->color
      << "\">" << html_escape(it->name) << "</text>\n";  // style: the page's CSS sets text fill
    legend_x -= 10 + 7.5 * double(it->name.size());
  }
  for (const auto& s : series) {
    if (s.points.empty()) continue;
    o << "<polyline class=\"series\" fill=\"none\" stroke=\"" << s.color
      << "\" stroke-width=\"1.5\" data-name=\"" << html_escape(s.name) << "\" points=\"";
    for (auto [x, y] : s.points)
      if (std::isfinite(y)) o << num(px(x)) << "," << num(py(y)) << " ";
    o << "\"/>\n";
    if (s.points.size() <= 50)
      for (auto [x, y] : s.points)
        if (std::isfinite(y))
          o << "<circle cx=\"" << num(px(x)) << "\" cy=\"" << num(py(y)) << "\" r=\"2.5\" fill=\""
            << s.color << "\"/>\n";
  }
  o << "</svg>\n";
  return o.str();
}

void write_report(const std::filesystem::path& output, const std::string& config_yaml,
                  const std::string& plan, const std::vector<std::string>& summary) {
  ChartSeries loss{"loss", "#1f77b4", {}}, eval{"eval_loss", "#d62728", {}},
      lr{"learning_rate", "#2ca02c", {}}, gn{"grad_norm", "#9467bd", {}},
      tps{"tokens/s", "#ff7f0e", {}}, host{"host", "#8c564b", {}}, dev{"device", "#17becf", {}};
  std::ifstream f(output / "metrics.jsonl");
  size_t line_no = 0;
  for (std::string line; std::getline(f, line);) {
    ++line_no;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      SF_FAIL((output / "metrics.jsonl").string(), ":", line_no, ": not valid JSON (", e.what(),
              ")");
    }
    const double step = j.value("step", 0.0);
    if (j.contains("loss")) {
      loss.points.emplace_back(step, j["loss"].get<double>());
      lr.points.emplace_back(step, j["learning_rate"].get<double>());
      gn.points.emplace_back(step, j["grad_norm"].get<double>());
      tps.points.emplace_back(step, j["tokens_per_second"].get<double>());
      if (j.contains("host_memory_gib"))
        host.points.emplace_back(step, j["host_memory_gib"].get<double>());
      if (j.contains("device_memory_gib"))
        dev.points.emplace_back(step, j["device_memory_gib"].get<double>());
    }
    if (j.contains("eval_loss")) eval.points.emplace_back(step, j["eval_loss"].get<double>());
  }
  std::ostringstream h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<title>SlideFormer training report</title>\n<style>\n"
       "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1320px}\n"
       "h1{font-size:20px} .charts{display:flex;flex-wrap:wrap;gap:12px}\n"
       ".chart{border:1px solid #ddd;background:#fff} .chart text{font-size:12px;fill:#444}\n"
       ".chart .title{font-weight:600;font-size:13px;fill:#222} .frame{fill:none;stroke:#ccc}\n"
       "pre{background:#f6f6f6;padding:12px;overflow:auto;font-size:12px}\n"
       "</style>\n</head>\n<body>\n<h1>SlideFormer training report</h1>\n<ul class=\"summary\">\n";
  for (const auto& s : summary) h << "<li>" << html_escape(s) << "</li>\n";
  h << "</ul>\n<div class=\"charts\">\n"
    << svg_line_chart("loss and eval loss", {loss, eval}) << svg_line_chart("learning rate", {lr})
    << svg_line_chart("gradient norm (before clipping)", {gn})
    << svg_line_chart("throughput (tokens/s)", {tps})
    << svg_line_chart("memory in use (GiB)",
                      dev.points.empty() ? std::vector{host} : std::vector{host, dev}, true)
    << "</div>\n<h2>Plan</h2>\n<pre class=\"plan\">" << html_escape(plan)
    << "</pre>\n<h2>Configuration</h2>\n<pre class=\"config\">" << html_escape(config_yaml)
    << "</pre>\n</body>\n</html>\n";
  write_file_atomic(output / "report.html", h.str());
}

}  // namespace sf
