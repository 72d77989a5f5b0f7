// defines: sf::Extent, sf::ExtentAllocator — first-fit allocation of aligned byte ranges in a
// file that grows at its end; freed ranges are merged with their neighbours and reused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>

namespace sf {

struct Extent {
  uint64_t offset = 0;  // a multiple of the allocator's alignment
  uint64_t bytes = 0;   // rounded up to the alignment
};

class ExtentAllocator {
 public:
  explicit ExtentAllocator(uint64_t alignment);

  // First fit among the free ranges, else at the end (`end()` then grows by the rounded size).
  // `bytes` > 0.
  Extent alloc(uint64_t bytes);
  // What alloc(bytes) would return, without taking it: the caller grows the file to `end` first
  // and commits only if that worked.
  Extent peek(uint64_t bytes) const;
  // Returns a range from alloc(); a range not allocated (or freed twice) is an sf::Error.
  void free(const Extent& e);

  uint64_t alignment() const { return align_; }
  uint64_t end() const { return end_; }            // the file must be at least this long
  uint64_t bytes_in_use() const { return used_; }  // allocated, rounded
  size_t free_ranges() const { return free_.size(); }

 private:
  uint64_t round_up(uint64_t bytes) const;

  uint64_t align_;
  uint64_t end_ = 0, used_ = 0;
  std::map<uint64_t, uint64_t> free_;  // offset -> bytes, disjoint and never adjacent
  std::map<uint64_t, uint64_t> used_ranges_;
};

}  // namespace sf
