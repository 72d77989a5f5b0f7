#include "io/extent_allocator.h"

#include "core/error.h"

namespace sf {

ExtentAllocator::ExtentAllocator(uint64_t alignment) : align_(alignment) {
  SF_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, "ExtentAllocator: alignment ",
           alignment, " is not a power of two");
}

uint64_t ExtentAllocator::round_up(uint64_t bytes) const {
  SF_CHECK(bytes > 0, "NVMe store: a region of 0 bytes was requested; ask for at least one byte");
  SF_CHECK(bytes <= UINT64_MAX - align_, "NVMe store: a region of ", bytes, " bytes is too large");
  return (bytes + align_ - 1) & ~(align_ - 1);
}

Extent ExtentAllocator::peek(uint64_t bytes) const {
  const uint64_t n = round_up(bytes);
  for (const auto& [off, len] : free_) {
    if (len >= n) return {off, n};
  }
  return {end_, n};
}

Extent ExtentAllocator::alloc(uint64_t bytes) {
  const Extent e = peek(bytes);
  if (e.offset == end_) {
    end_ += e.bytes;
  } else {
    auto it = free_.find(e.offset);
    const uint64_t left = it->second - e.bytes;
    free_.erase(it);
    if (left > 0) free_.emplace(e.offset + e.bytes, left);
  }
  used_ranges_.emplace(e.offset, e.bytes);
  used_ += e.bytes;
  return e;
}

void ExtentAllocator::free(const Extent& e) {
  auto used = used_ranges_.find(e.offset);
  SF_CHECK(used != used_ranges_.end() && used->second == e.bytes,
           "NVMe store: free of a region that is not allocated (offset ", e.offset, ", ", e.bytes,
           " bytes): a region is freed once, as alloc() returned it");
  used_ranges_.erase(used);
  used_ -= e.bytes;
  uint64_t off = e.offset, len = e.bytes;
  auto next = free_.lower_bound(off);
  if (next != free_.end() && next->first == off + len) {  // merge with the range after
    len += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {  // merge with the range before
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      off = prev->first;
      len += prev->second;
      free_.erase(prev);
    }
  }
  free_.emplace(off, len);
}

}  // namespace sf
