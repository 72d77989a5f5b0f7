#include "cli/train_args.h"

#include <CLI/CLI.hpp>
#include <map>
#include <ostream>

#include "core/error.h"
#include "train/config_file.h"
#include "train/options.h"

namespace sf {
namespace {

std::string dashed(std::string s) {
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

// "--learning-rate,--learning_rate,--lr": every spelling CLI11 should accept for an option.
std::string cli_names(const OptionSpec& o) {
  std::vector<std::string> names;
  auto add = [&](const std::string& n) {
    for (const std::string& s : {dashed(n), n})
      if (std::find(names.begin(), names.end(), s) == names.end()) names.push_back(s);
  };
  add(o.name);
  for (const auto& a : o.aliases) add(a);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "--" : ",--") + n;
  return out;
}

bool is_yaml(const std::string& s) {
  auto ends = [&](const char* e) {
    const std::string x = e;
    return s.size() > x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  return ends(".yaml") || ends(".yml");
}

// How the command line spelled option `o` ("--lr"), for errors in the user's words.
std::string spelling(const std::vector<std::string>& argv, const OptionSpec& o) {
  for (const auto& a : argv) {
    if (a.rfind("--", 0) != 0) continue;
    std::string key =
        a.substr(2, a.find('=') == std::string::npos ? std::string::npos : a.find('=') - 2);
    if (key.rfind("no-", 0) == 0 || key.rfind("no_", 0) == 0) {
      const OptionSpec* neg = find_train_option(key.substr(3));
      if (neg == &o && !find_train_option(key)) return "--" + key;
    }
    if (find_train_option(key) == &o) return "--" + key;
  }
  return "--" + dashed(o.name);
}

}  // namespace

std::string train_help() {
  const TrainConfig defaults;
  std::string out =
      "usage: slideformer train [run.yaml] [key=value ...] [--key value ...]\n"
      "Every option can be set in the YAML file (key: value), as key=value, or as --key value\n"
      "(or --key=value; '-' and '_' are the same). Precedence: defaults < the YAML file < the\n"
      "command line. Boolean options are also flags (--packing, --no-packing).\n"
      "Other: --help, --version.\n";
  std::string group;
  for (const auto& o : train_options()) {
    if (o.group != group) out += "\n" + (group = o.group) + ":\n";
    out += "  --" + dashed(o.name);
    for (const auto& a : o.aliases) out += ", --" + dashed(a);
    out += "   (YAML: " + o.name + ")";
    out += "\n      " + o.help + "\n      accepted: " + o.accepted;
    const std::string d = o.get(defaults);
    out += "; default: " + (d.empty() ? std::string("(none)") : d) + "\n";
  }
  return out;
}

TrainArgs parse_train_args(const std::vector<std::string>& argv, std::ostream& out) {
  TrainArgs result;
  for (const auto& a : argv) {
    if (a == "--help" || a == "-h") {
      out << train_help();
      result.exit_now = true;
      return result;
    }
    if (a == "--version") {
      out << "slideformer " << kSlideformerVersion << "\n";
      result.exit_now = true;
      return result;
    }
  }
  CLI::App app{"slideformer train", "train"};
  app.set_help_flag();  // answered above, from the option table
  app.allow_extras();   // unknown options are reported below with the nearest name
  std::map<std::string, std::vector<std::string>> given;  // canonical name -> values
  std::map<std::string, std::string> spelled;             // canonical name -> as written
  std::vector<std::string> positionals;
  for (const auto& o : train_options()) {
    if (o.type == OptionSpec::Type::kBool) {
      // A flag (--packing, --packing=false) never takes the next argument as its value; --no-X
      // says false (the `cache` option's --no-cache).
      std::string names = cli_names(o);
      for (size_t at = 0; (at = names.find(',', at)) != std::string::npos; at += 7)
        names.insert(at, "{true}");
      app.add_flag(names + "{true}", given[o.name]);
      if (o.name.rfind("no_", 0) != 0)
        app.add_flag("--no-" + dashed(o.name) + "{false},--no_" + o.name + "{false}",
                     given[o.name]);
    } else {
      app.add_option(cli_names(o), given[o.name])
          ->expected(1)  // one value per occurrence: the next word is never swallowed
          ->allow_extra_args(false)
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
  }
  app.add_option("args", positionals);
  std::vector<std::string> args(argv.rbegin(), argv.rend());  // CLI11 takes them reversed
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    SF_FAIL("train: ", e.what(), " (slideformer train --help lists every option)");
  }
  for (const auto& extra : app.remaining()) {
    std::string key = extra;
    if (key.rfind("--", 0) == 0)
      key = key.substr(2);
    else if (key.rfind("-", 0) == 0)
      key = key.substr(1);
    key = key.substr(0, key.find('='));
    SF_FAIL("train: unknown option ", extra.substr(0, extra.find('=')), "; did you mean --",
            dashed(nearest_train_option(key)), "? (slideformer train --help lists them all)");
  }

  TrainConfig& c = result.config;
  std::vector<std::pair<std::string, std::string>> overrides;  // key=value
  for (const auto& p : positionals) {
    const auto eq = p.find('=');
    if (eq != std::string::npos && eq > 0) {
      overrides.emplace_back(p.substr(0, eq), p.substr(eq + 1));
      continue;
    }
    SF_CHECK(is_yaml(p), "train: unexpected argument '", p,
             "': expected a configuration file (.yaml/.yml), key=value or --key value");
    SF_CHECK(positionals.front() == p, "train: the configuration file ", p,
             " must come first, before key=value overrides");
    load_config_file(c, p);
  }
  std::map<std::string, std::string> set_by;  // canonical -> how the command line said it
  auto apply = [&](const OptionSpec& o, const std::string& value, const std::string& where) {
    auto [it, fresh] = set_by.emplace(o.name, where);
    SF_CHECK(fresh, "train: ", o.name, " is given twice on the command line (", it->second, " and ",
             where, "): keep one");
    o.set(c, value, where);
  };
  for (const auto& [key, value] : overrides) {
    const OptionSpec* o = find_train_option(key);
    SF_CHECK(o, "train: unknown option '", key, "' in '", key, "=", value, "'; did you mean '",
             nearest_train_option(key), "'? (slideformer train --help lists them all)");
    apply(*o, value, "argument " + key + "=" + value);
  }
  for (const auto& o : train_options()) {
    const auto& v = given[o.name];
    SF_CHECK(v.size() <= 1, "train: --", dashed(o.name), " is given more than once: keep one");
    if (!v.empty()) apply(o, v[0], spelling(argv, o));
  }
  validate_config(c);
  return result;
}

}  // namespace sf
