// OUTPUT/report.html: one self-contained page (no script, no external file) with an SVG plot per
// metric whose points are the run's steps, the summary and the configuration (escaped).
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "train/report.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace sf {
namespace {

using namespace sf::testing;


TEST(TrainReport, PageHoldsEveryPlotAndTheConfiguration) {
  const fs::path d = fresh_dir("report");
  TrainConfig c;
  c.model_dir = tiny_model(d);
  c.data = token_dataset(d / "data.jsonl", 12);
  c.val_size = 2;
  c.eval_steps = 3;
  c.cutoff_len = 16;
  c.steps = 6;
  c.batch_size = 2;
  c.cache = false;
  c.columns = {"text=<b>not&html</b>"};  // must appear escaped (unused by token data)
  c.output_dir = d / "out";
  std::ostringstream log;
  run_training(c, log);
  const std::string html = read_text(c.output_dir / "report.html");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(count_of(html, "<svg "), 5u);
  EXPECT_EQ(count_of(html, "</svg>"), 5u);
  for (const char* title : {"loss and eval loss", "learning rate", "gradient norm",
                            "throughput (tokens/s)", "memory in use (GiB)"})
    EXPECT_NE(html.find(title), std::string::npos) << title;
  // loss: 6 points; eval_loss: steps 3 and 6.
  const std::regex poly("<polyline[^>]*data-name=\"([a-z_/s]+)\" points=\"([^\"]*)\"");
  std::map<std::string, size_t> points;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), poly); it != std::sregex_iterator();
       ++it)
    points[(*it)[1]] = count_of((*it)[2], ",");
  EXPECT_EQ(points["loss"], 6u);
  EXPECT_EQ(points["eval_loss"], 2u);
  EXPECT_EQ(points["learning_rate"], 6u);
  EXPECT_EQ(points["grad_norm"], 6u);
  EXPECT_EQ(points["host"], 6u);  // the CPU backend has no device memory to plot
  EXPECT_EQ(points.count("device"), 0u);
  // The engine's plan, as train prints it.
  const size_t plan = html.find("<h2>Plan</h2>\n<pre class=\"plan\">window 2, micro-batches of");
  EXPECT_NE(plan, std::string::npos) << html;
  EXPECT_LT(plan, html.find("<h2>Configuration</h2>"));
  EXPECT_NE(html.find("columns: &quot;text=&lt;b&gt;not&amp;html&lt;/b&gt;&quot;"),
            std::string::npos);
  EXPECT_NE(html.find("finished: 6 steps"), std::string::npos);
  EXPECT_NE(html.find("eval_loss "), std::string::npos);
  // Self-contained: nothing fetched.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find(" src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
}

// The axis labels carry the digits that tell its ends apart (both read "0.1739" at 4 digits);
// amounts (memory) are drawn from 0.
TEST(TrainReport, AxisLabelsTellTheEndsApartAndAmountsStartAtZero) {
  const ChartSeries s{"host", "#000", {{1, 0.173912}, {2, 0.173948}}};
  const std::string svg = svg_line_chart("memory", {s});
  EXPECT_NE(svg.find(">0.173948</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">0.173912</text>"), std::string::npos) << svg;
  const std::string zero = svg_line_chart("memory", {s}, true);
  EXPECT_NE(zero.find(">0</text>"), std::string::npos) << zero;
  EXPECT_NE(zero.find(">0.1739</text>"), std::string::npos) << zero;
}

TEST(TrainReport, ChartWithoutDataSaysSo) {
  const std::string svg = svg_line_chart("empty", {ChartSeries{"x", "#000", {}}});
  EXPECT_NE(svg.find("no data"), std::string::npos);
  EXPECT_EQ(svg.find("<polyline"), std::string::npos);
}

}  // namespace
}  // namespace sf
