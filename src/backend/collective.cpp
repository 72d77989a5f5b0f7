// defines: sf::make_peer_collective (collective.h) — a reduction written against sf::Backend: the
// root waits for each rank's tensor, copies it through a scratch tile and adds it, in rank order.
#include "backend/collective.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "core/error.h"

namespace sf {
namespace {

class PeerCollective final : public Collective {
 public:
  PeerCollective(const std::vector<Backend*>& backends, size_t tile_bytes)
      : be_(backends), x_(backends.size()) {
    SF_CHECK(!be_.empty(), "peer collective: no devices");
    tile_elems_ = int64_t(std::max<size_t>(tile_bytes / 4, 1024));
    for (Backend* b : be_) {
      ready_.push_back(b->create_event());
      consumed_.push_back(b->create_event());
      tile_.push_back(be_.size() > 1 ? b->alloc(MemoryKind::kDevice, size_t(tile_elems_) * 4,
                                                "collective scratch tile")
                                     : Buffer());
    }
  }

  int ranks() const override { return int(be_.size()); }
  std::string describe() const override {
    return str_cat("gradient reduction: peer copies and adds through a ",
                   tile_elems_ * 4 >> 20, " MiB tile on the root, in rank order (",
                   be_.size(), " engines)");
  }

  void reduce_sum(int rank, Tensor x, int root, Stream& s) override {
    SF_CHECK(x.dtype == DType::kF32, "collective: reduce_sum takes F32, got ",
             dtype_name(x.dtype));
    if (be_.size() == 1) return;
    Backend& me = *be_[size_t(rank)];
    me.record(*ready_[size_t(rank)], s);
    x_[size_t(rank)] = x;
    // Every rank's tensor is recorded before the root's stream captures the events.
    rendezvous();
    if (rank == root) {
      const int64_t n = x.numel();
      for (size_t r = 0; r < be_.size(); ++r) {
        if (int(r) == root) continue;
        SF_CHECK(x_[r].numel() == n, "collective: rank ", r, " reduces ", x_[r].numel(),
                 " elements, the root ", n, " (every rank must make the same calls)");
        me.wait(s, *ready_[r]);
        for (int64_t off = 0; off < n; off += tile_elems_) {
          const int64_t k = std::min(tile_elems_, n - off);
          Tensor tile(tile_[size_t(root)].data(), DType::kF32, {k});
          Tensor mine(x.f32() + off, DType::kF32, {k});
          me.copy(tile.data, x_[r].f32() + off, size_t(k) * 4, s);
          me.add(mine, mine, tile, s);
        }
      }
      me.record(*consumed_[size_t(root)], s);
    }
    // The root has recorded the end of its reads before the others capture it.
    rendezvous();
    if (rank != root) me.wait(s, *consumed_[size_t(root)]);
  }

  void abort(const std::string& why) override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (aborted_.empty()) aborted_ = why.empty() ? "aborted" : why;
    }
    cv_.notify_all();
  }

 private:
  // Blocks until every rank has arrived (one generation of a reusable barrier).
  void rendezvous() {
    std::unique_lock<std::mutex> lk(mu_);
    SF_CHECK(aborted_.empty(), "gradient reduction stopped: ", aborted_);
    const int64_t gen = generation_;
    if (++arrived_ == int(be_.size())) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lk, [&] { return generation_ != gen || !aborted_.empty(); });
    SF_CHECK(generation_ != gen, "gradient reduction stopped: ", aborted_);
  }

  std::vector<Backend*> be_;
  std::vector<std::unique_ptr<Event>> ready_, consumed_;
  std::vector<Buffer> tile_;
  std::vector<Tensor> x_;
  int64_t tile_elems_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int64_t generation_ = 0;
  std::string aborted_;
};

}  // namespace

std::unique_ptr<Collective> make_peer_collective(const std::vector<Backend*>& backends,
                                                 size_t tile_bytes) {
  return std::make_unique<PeerCollective>(backends, tile_bytes);
}

}  // namespace sf
