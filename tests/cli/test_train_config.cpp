// `slideformer train` configuration: the YAML file, key=value and --key value overrides with
// their precedence, the HF / LLaMA-Factory aliases, "did you mean" for unknown names, every value
// checked before any file is read, --help and --version, and the effective configuration.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/train_args.h"
#include "core/error.h"
#include "train/config_file.h"
#include "train/options.h"

namespace sf {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("sf_cfg_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}

TrainConfig parse(const std::vector<std::string>& argv) {
  std::ostringstream out;
  return parse_train_args(argv, out).config;
}

std::string error_of(const std::vector<std::string>& argv) {
  try {
    parse(argv);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

const std::vector<std::string> kBase = {"--model", "/m", "--data", "/d.txt", "--no-save"};

std::vector<std::string> with(std::vector<std::string> extra) {
  std::vector<std::string> a = kBase;
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(TrainConfig, YamlThenCommandLineWithAliases) {
  const fs::path d = temp_dir("yaml");
  write_text(d / "run.yaml",
             "model_name_or_path: /models/tiny\n"
             "train_data: /data/book.txt\n"
             "output_dir: /out\n"
             "learning_rate: 2.0e-5\n"
             "per_device_train_batch_size: 8\n"
             "gradient_accumulation_steps: 4\n"
             "num_train_epochs: 2\n"
             "lr_scheduler_type: cosine\n"
             "warmup_ratio: 0.1\n"
             "max_grad_norm: 0.5\n"
             "template: chatml\n"
             "cutoff_len: 1024\n"
             "columns: [output=response, instruction=prompt]\n"
             "packing: true\n");
  TrainConfig c = parse({(d / "run.yaml").string()});
  EXPECT_EQ(c.model_dir, "/models/tiny");
  EXPECT_EQ(c.data, "/data/book.txt");
  EXPECT_EQ(c.output_dir, "/out");
  EXPECT_EQ(c.lr, 2e-5f);
  EXPECT_EQ(c.batch_size, 8);
  EXPECT_EQ(c.grad_accum, 4);
  EXPECT_EQ(c.num_train_epochs, 2.0);
  EXPECT_EQ(c.schedule, "cosine");
  EXPECT_EQ(c.warmup_ratio, 0.1);
  EXPECT_EQ(c.max_grad_norm, 0.5f);
  EXPECT_EQ(c.chat_template, "chatml");
  EXPECT_EQ(c.cutoff_len, 1024);
  EXPECT_EQ(c.columns, (std::vector<std::string>{"output=response", "instruction=prompt"}));
  EXPECT_TRUE(c.packing);
  // Precedence: the command line (key=value and --key value alike) wins over the file.
  c = parse({(d / "run.yaml").string(), "learning_rate=3e-4", "--batch-size", "2", "--max_steps=7",
             "--no-packing", "--shuffle", "--window", "3"});
  EXPECT_EQ(c.lr, 3e-4f);
  EXPECT_EQ(c.batch_size, 2);
  EXPECT_EQ(c.steps, 7);
  EXPECT_FALSE(c.packing);
  EXPECT_TRUE(c.shuffle);
  EXPECT_EQ(c.window, 3);
  EXPECT_EQ(c.grad_accum, 4);  // kept from the file
  // The old spellings keep working.
  c = parse({"--model", "/m", "--data", "/d", "--output", "/o", "--steps", "3", "--lr", "1e-3",
             "--eps", "1e-6", "--schedule", "linear", "--no-cache", "--columns", "text=body"});
  EXPECT_EQ(c.steps, 3);
  EXPECT_EQ(c.lr, 1e-3f);
  EXPECT_EQ(c.eps, 1e-6f);
  EXPECT_EQ(c.schedule, "linear");
  EXPECT_FALSE(c.cache);
  EXPECT_EQ(c.columns, (std::vector<std::string>{"text=body"}));
}

TEST(TrainConfig, UnknownNamesSayTheNearest) {
  EXPECT_NE(error_of(with({"--stepz", "3"})).find("unknown option --stepz; did you mean --steps?"),
            std::string::npos);
  EXPECT_NE(error_of(with({"learnin_rate=1e-3"})).find("did you mean 'learning_rate'"),
            std::string::npos);
  const fs::path d = temp_dir("unknown");
  write_text(d / "run.yaml", "model_name_or_path: /m\n\nnum_train_epoch: 3\n");
  const std::string e = error_of({(d / "run.yaml").string()});
  EXPECT_NE(e.find("run.yaml:3: unknown option 'num_train_epoch'; did you mean "
                   "'num_train_epochs'?"),
            std::string::npos)
      << e;
}

TEST(TrainConfig, EveryValueIsChecked) {
  auto expect = [](const std::vector<std::string>& args, const std::string& text) {
    const std::string e = error_of(with(args));
    EXPECT_NE(e.find(text), std::string::npos)
        << "args: " << args[0] << " " << args.back() << "\nerror: " << e;
  };
  expect({"--batch-size", "9223372036854775807"},
         "--batch-size: must be an integer in [1, 1048576], got 9223372036854775807");
  expect({"--batch-size", "99999999999999999999999"}, "--batch-size: must be an integer in");
  expect({"--window", "4294967297"}, "--window: must be an integer in [1, 4096]");
  expect({"--eps", "0"}, "--eps: must be in (0, 1], got 0");
  expect({"--eps", "1e-50"}, "--eps: 1e-50 is 0 in float (single) precision");
  expect({"--lr", "1e39"}, "--lr: must be in [0, 1e+38]");
  expect({"--lr", "nan"}, "--lr: expects a number");
  expect({"--loss-mask", "everything"}, "--loss-mask: must be one of assistant|all|last");
  expect({"--dataset-format", "csv"}, "--dataset-format: must be one of auto|text|alpaca");
  expect({"--schedule", "exponential"}, "must be one of constant|constant_with_warmup|linear");
  expect({"--steps", "0"}, "must be -1 (use num_train_epochs) or >= 1, got 0");
  expect({"--packing=maybe"}, "expects true or false, got 'maybe'");
  expect({"--num-train-epochs", "0"}, "--num-train-epochs: must be in (0, 1e+06]");
  expect({"--warmup-ratio", "1.5"}, "--warmup-ratio: must be in [0, 1]");
  expect({"--seed", "-1"}, "--seed: must be an integer in [0, 9223372036854775807]");
  expect({"--steps", "3", "steps=4"}, "given twice on the command line");
  expect({"--val-size", "0.1", "--eval-data", "/e.jsonl"}, "eval_data and val_size both given");
  expect({"--eval-steps", "5"}, "needs evaluation data");
  expect({"--batch-size", "1048576", "--gradient-accumulation-steps", "1048576"},
         "tokens per optimizer step, more than a step can index");
  expect({"stray"}, "unexpected argument 'stray'");
  expect({"--max-grad-norm", "0", "--moments-later", "3"},
         "moments_later 3 splits the update after the clipping norm, and max_grad_norm is 0");
  expect({"--held-gradients", "8"}, "held_gradients 8 applies without clipping");
  // output_dir is required unless --no-save is said.
  std::string e = error_of({"--model", "/m", "--data", "/d"});
  EXPECT_NE(e.find("output_dir is required"), std::string::npos) << e;
  EXPECT_NE(e.find("--no-save"), std::string::npos) << e;
}

TEST(TrainConfig, YamlErrorsNameFileLineAndKey) {
  const fs::path d = temp_dir("yamlerr");
  auto err = [&](const std::string& text) {
    write_text(d / "run.yaml", text);
    return error_of({(d / "run.yaml").string()});
  };
  std::string e = err("model_name_or_path: /m\nlearning_rate: fast\n");
  EXPECT_NE(e.find("run.yaml:2: learning_rate: expects a number"), std::string::npos) << e;
  e = err("lr: 1e-3\nlearning_rate: 2e-3\n");
  EXPECT_NE(e.find("run.yaml:2: learning_rate: learning_rate is already set on line 1"),
            std::string::npos)
      << e;
  e = err("a: [1, 2\nb: 3\n");
  EXPECT_NE(e.find("run.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("not valid YAML"), std::string::npos) << e;
  e = err("- just\n- a list\n");
  EXPECT_NE(e.find("expected a mapping"), std::string::npos) << e;
  e = err("learning_rate:\n");
  EXPECT_NE(e.find("run.yaml:1: learning_rate: has no value"), std::string::npos) << e;
  e = err("learning_rate: {a: 1}\n");
  EXPECT_NE(e.find("not a mapping"), std::string::npos) << e;
  e = error_of({d.string() + ".yaml"});
  EXPECT_NE(e.find("does not exist"), std::string::npos) << e;
  fs::create_directories(d / "dir.yaml");
  e = error_of({(d / "dir.yaml").string()});
  EXPECT_NE(e.find("dir.yaml is a directory"), std::string::npos) << e;
}

TEST(TrainConfig, HelpListsEveryOptionAndVersion) {
  std::ostringstream out;
  EXPECT_TRUE(parse_train_args({"--help"}, out).exit_now);
  const std::string help = out.str();
  for (const auto& o : train_options()) {
    std::string dashed = o.name;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    EXPECT_NE(help.find("--" + dashed), std::string::npos) << o.name;
  }
  EXPECT_NE(help.find("--learning-rate, --lr   (YAML: learning_rate)\n"), std::string::npos)
      << help;
  EXPECT_NE(help.find("accepted: number in [0, 1e38]; default: 1e-04\n"), std::string::npos);
  EXPECT_NE(help.find("accepted: assistant|all|last; default: assistant"), std::string::npos);
  std::ostringstream md;
  EXPECT_TRUE(parse_train_args({"--help-markdown"}, md).exit_now);
  for (const auto& o : train_options())
    EXPECT_NE(md.str().find("| `" + o.name + "` |"), std::string::npos) << o.name;
  EXPECT_NE(md.str().find("| `learning_rate` | `lr` | number in [0, 1e38] | `1e-04` | peak "
                          "learning rate |"),
            std::string::npos)
      << md.str();
  EXPECT_NE(md.str().find("| assistant\\|all\\|last | `assistant` |"), std::string::npos);
  std::ostringstream v;
  EXPECT_TRUE(parse_train_args({"--version"}, v).exit_now);
  EXPECT_EQ(v.str(), std::string("slideformer ") + kSlideformerVersion + "\n");
}

// The effective configuration reads back as the same configuration.
TEST(TrainConfig, EffectiveConfigurationRoundTrips) {
  TrainConfig c = parse(with({"--lr", "3.3e-5", "--chat-template", "/t/has \"quotes\".jinja",
                              "--columns", "output=response,input=ctx", "--seed", "7",
                              "--min-lr-ratio", "0.1", "--val-size", "0.05"}));
  const fs::path d = temp_dir("roundtrip");
  write_text(d / "eff.yaml", config_to_yaml(c));
  TrainConfig back;
  load_config_file(back, d / "eff.yaml");
  EXPECT_EQ(config_to_yaml(back), config_to_yaml(c));
  EXPECT_EQ(back.lr, 3.3e-5f);
  EXPECT_EQ(back.chat_template, "/t/has \"quotes\".jinja");
  EXPECT_EQ(back.columns.size(), 2u);
  EXPECT_EQ(back.val_size, 0.05);
}

}  // namespace
}  // namespace sf
