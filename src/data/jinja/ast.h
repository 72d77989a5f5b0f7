// defines: sf::jinja::Node (expressions), Stmt (statements) — the parsed template
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/jinja/value.h"

namespace sf::jinja {

struct Node;
struct Stmt;
using NodePtr = std::shared_ptr<Node>;
using StmtPtr = std::shared_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class NodeKind {
  kConst,    // value
  kName,     // name
  kList,     // kids
  kTuple,    // kids
  kDict,     // kids: key, value, key, value, ...
  kAttr,     // kids[0].name
  kItem,     // kids[0][kids[1]]
  kSlice,    // kids[0][kids[1]:kids[2]:kids[3]] (null kids for omitted parts)
  kCall,     // kids[0](kids[1..], kwargs)
  kFilter,   // kids[0] | name(kids[1..], kwargs)
  kTest,     // kids[0] is [not] name(kids[1..], kwargs); negated
  kNeg,      // -kids[0]
  kPos,      // +kids[0]
  kNot,      // not kids[0]
  kAnd,      // kids[0] and kids[1]
  kOr,       // kids[0] or kids[1]
  kBinary,   // kids[0] op kids[1]; name = "+", "-", "*", "/", "//", "%", "**", "~"
  kCompare,  // kids[0] ops[0] kids[1] ops[1] kids[2] ...; ops: == != < <= > >= in notin
  kCond,     // kids[0] if kids[1] else kids[2] (kids[2] null: undefined)
};

struct Node {
  NodeKind kind;
  int line = 0;
  int depth = 1;  // of the subtree (the parser refuses more than kMaxNesting)
  std::string name;
  Value value;
  bool negated = false;
  std::vector<NodePtr> kids;
  std::vector<std::pair<std::string, NodePtr>> kwargs;
  std::vector<std::string> ops;
};

enum class StmtKind {
  kText,         // text
  kPrint,        // expr
  kIf,           // expr, body, else_body (an elif is an kIf alone in else_body)
  kFor,          // targets in expr [if cond] body [else else_body]
  kSet,          // targets = expr, or attr: targets[0].attr = expr
  kSetBlock,     // targets[0] = rendered body
  kMacro,        // name(params) body
  kCallBlock,    // expr (a call) with `caller` = body taking params
  kFilterBlock,  // expr: filter chain over a kName "" placeholder; body
  kBreak,
  kContinue,
  kGeneration,  // {% generation %} (transformers' assistant tracker): renders its body
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;  // kText; kMacro name; kSet attribute
  NodePtr expr;
  NodePtr cond;  // kFor filter
  std::vector<std::string> targets;
  std::vector<std::pair<std::string, NodePtr>> params;  // kMacro, kCallBlock: name, default
  Body body, else_body;
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;  // kMacro
};

}  // namespace sf::jinja
