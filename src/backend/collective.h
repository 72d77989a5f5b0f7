// defines: sf::Collective, sf::make_peer_collective — the gradient reduction of a data-parallel
// run: one engine per device, each on its own share of a step's samples, and each unit's fp32
// gradient summed over the devices into one of them (the root) before it goes to the host, so
// the host link carries every gradient once (engine/engine.h, --gpus).
//
// Two implementations: NCCL's reduce where the devices are distinct GPUs (backend/cuda/nccl.h),
// and the peer collective here, written against sf::Backend alone: the root copies each other
// rank's tensor through a scratch tile on its device and adds it, in rank order. The peer one is
// what the CPU reference runs (simulated devices: its sums are the single-device run's, bit for
// bit, engine tests) and what several engines on one GPU use (a device cannot be two NCCL ranks).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace sf {

class Collective {
 public:
  virtual ~Collective() = default;
  virtual int ranks() const = 0;
  virtual std::string describe() const = 0;  // one line for the run's log
  // x (F32, on rank `rank`'s device) summed over every rank into rank `root`'s x, in stream order
  // on `s` (a stream of rank `rank`'s backend); the other ranks' x may be written again once
  // their stream passes the call. Every rank calls it from its own thread, with the same count
  // and root, in the same order; a call may block its host thread until every rank has made it.
  virtual void reduce_sum(int rank, Tensor x, int root, Stream& s) = 0;
  // Wakes every rank blocked in reduce_sum and makes it and every later call throw: for a run
  // whose other rank failed (its thread will never arrive). The collective cannot be used again.
  virtual void abort(const std::string& why) = 0;
};

// backends[r] is rank r's; they must share one memory space through Backend::copy (one process:
// CPU backends, or CUDA devices with unified addressing). `tile_bytes` of scratch on each rank
// that can be a root (allocated here, once, from its backend).
std::unique_ptr<Collective> make_peer_collective(const std::vector<Backend*>& backends,
                                                 size_t tile_bytes = size_t(32) << 20);

}  // namespace sf
