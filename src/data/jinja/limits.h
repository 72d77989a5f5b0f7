// defines: the limits a chat template runs under (sf::jinja::kMax*), named in the error when hit.
// Real chat templates (../shared/data, transformers' hub) nest < 10 deep, render < 1 MB and take
// < 10^5 steps per conversation; the limits are far above that and far below what exhausts the
// stack, the memory or the user's patience (docs/decisions.md, 2026-12-03 "hostile input").
#pragma once

#include <cstddef>
#include <cstdint>

namespace sf::jinja {

// Nesting of the parsed template: brackets, unary operators, operator and filter chains,
// {% if/for/macro/... %} blocks. Python's own parser stops at 200 nested parentheses.
inline constexpr int kMaxNesting = 100;
// Nested evaluation at render time (expressions inside macros inside loops ...): bounds the stack.
inline constexpr int kMaxEvalDepth = 2000;
// Nesting of a value: lists and dicts in lists and dicts, from the input JSON or built by the
// template (the JSON readers refuse deeper input before parsing: data/json_limits.h).
inline constexpr int kMaxValueDepth = 500;
// Bytes of any one string (or elements of one list) a template builds, and of the rendered text.
inline constexpr size_t kMaxStringBytes = size_t{64} << 20;
// Statements executed plus expressions evaluated (plus one per 64 bytes of strings or per list
// element built, eight per loop iteration) in one render: a few seconds of work at most
// (2026-12-03, 2-core CI machine: 20M steps of empty loops in 3.4 s). A 1600-message conversation
// through the Qwen2.5 template takes about 10^5.
inline constexpr int64_t kMaxRenderSteps = 20'000'000;

}  // namespace sf::jinja
