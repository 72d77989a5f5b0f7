#include "engine/host_check.h"

#include <optional>

#include "core/error.h"
#include "core/host_memory.h"

namespace sf {

// The margin covers what the process takes outside the plan while it runs: the driver's
// bookkeeping of pinned memory, the CUDA libraries' host allocations, the copy of a checkpoint
// being written — 2 GiB plus 2 % of the pinned total. (The checkpoint read at start is a
// read-only mapping whose pages are released tensor by tensor: page cache, not memory held.)
uint64_t host_margin(uint64_t pinned) { return (uint64_t(2) << 30) + pinned / 50; }

uint64_t host_limit_for_plan(uint64_t budget, bool also_available) {
  EnginePlan none;
  const HostCheck c = check_host(none, budget, also_available);
  return c.limit > c.held ? c.limit - c.held : 0;
}

HostCheck check_host(const EnginePlan& plan, uint64_t budget, bool also_available) {
  HostCheck c;
  c.pinned = plan.host.total();
  c.held = process_memory().rss;
  c.margin = host_margin(c.pinned);
  const std::optional<HostMemory> avail =
      budget == 0 || also_available ? host_memory_available() : std::nullopt;
  if (budget > 0 && (!avail || budget <= avail->bytes)) {
    c.limit = budget;
    c.limit_source = "--host-memory";
  } else if (avail) {
    c.limit = avail->bytes;
    c.limit_source = str_cat("available, ", avail->source);
  }
  return c;
}

std::string HostCheck::refusal(const EnginePlan& plan) const {
  return str_cat("not enough host memory for this run: it needs ", gib(need()), " — ", gib(pinned),
                 " for the engine (", plan.describe(), "), ", gib(held),
                 " this process already holds (data, tokenizer) and a margin of ", gib(margin),
                 " (2 GiB + 2 % of the engine's) — and the limit is ", gib(limit), " (",
                 limit_source,
                 "). Train a smaller model or on a machine with more memory; if the checkpoints "
                 "are what does not fit, lower the tokens per step (--batch-size, --cutoff-len)");
}

}  // namespace sf
