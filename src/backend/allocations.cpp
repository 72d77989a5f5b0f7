#include <atomic>

#include "backend/backend.h"

namespace sf {
namespace {
std::atomic<uint64_t> g_allocations{0};
}  // namespace

uint64_t backend_allocations() { return g_allocations.load(std::memory_order_relaxed); }
void count_backend_allocation() { g_allocations.fetch_add(1, std::memory_order_relaxed); }

}  // namespace sf
