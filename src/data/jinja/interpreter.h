// defines: sf::jinja::Interpreter — executes a parsed Body (statements, scopes, macros, loops)
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include "data/jinja/ast.h"

namespace sf::jinja {

class Interpreter {
 public:
  Interpreter(std::string name, const Value& context);
  std::string run(const Body& body);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Frame = std::unordered_map<std::string, Value>;

  Flow exec(const Body& body);
  Flow exec_stmt(const Stmt& s);
  Flow exec_stmt_inner(const Stmt& s);
  void exec_for(const Stmt& s);
  Value eval(const Node& n);
  Value eval_inner(const Node& n);
  Value eval_call(const Node& n, const Value* caller);
  CallArgs eval_args(const Node& n, size_t first);
  Value lookup(const std::string& name) const;
  void assign(const std::vector<std::string>& targets, const Value& v);
  std::string render_body(const Body& body);
  Value make_macro(const Stmt& m, const std::string& name);
  [[noreturn]] void fail(int line, const std::string& msg) const;

  std::string name_;
  std::vector<Frame> frames_;  // [0]: globals, [1]: render context and top-level sets
  std::string* out_ = nullptr;
  int macro_depth_ = 0;
  static constexpr int kMaxMacroDepth = 200;
  int eval_depth_ = 0;     // kMaxEvalDepth (limits.h)
  int64_t steps_ = 0;      // kMaxRenderSteps
  void step(int line, size_t bytes = 0);  // counts work; fails past the limits
  void check_size(int line, size_t n, const char* what) const;
};

}  // namespace sf::jinja
