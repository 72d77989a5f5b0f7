// defines: sf::HostCheck, sf::check_host — whether a plan's host memory fits: the plan's pinned
// buffers, what the process already holds and a margin, against what the machine can give (or a
// budget: --host-memory, to plan for another machine or to leave room for others).
#pragma once

#include <cstdint>
#include <string>

#include "engine/plan.h"

namespace sf {

struct HostCheck {
  uint64_t pinned = 0;  // the plan's host total
  uint64_t held = 0;    // this process's resident memory now (data, tokenizer, libraries)
  uint64_t margin = 0;  // what it will still take outside the plan (see host_check.cpp)
  uint64_t need() const { return pinned + held + margin; }
  uint64_t limit = 0;   // what may be taken; 0 when unknown (no check)
  std::string limit_source;
  bool fits() const { return limit == 0 || need() <= limit; }
  std::string refusal(const EnginePlan& plan) const;  // the error text when it does not fit
};

// What the process takes outside the plan while it runs, for a plan's host total `pinned`.
uint64_t host_margin(uint64_t pinned);

// The host bytes a plan may take: the budget (or, where 0 or `also_available`, what the machine
// has available) less this process's resident memory; 0 when unknown.
uint64_t host_limit_for_plan(uint64_t budget, bool also_available);

// `budget`: 0 for what the machine has available; else that budget (the smaller of the two when
// `also_available`, as a run does; a plan for another machine counts the budget alone).
HostCheck check_host(const EnginePlan& plan, uint64_t budget, bool also_available);

}  // namespace sf
