// defines: sf::settle_nvme_slot — waits for the I/O in flight on a staging slot of the NVMe tier or
// the NVMe checkpoints (engine/nvme_tier.h, engine/nvme_checkpoints.h), with their mutex released
// meanwhile; one thread waits on the store, the others on the condition variable. The slot type
// has `io` (in flight), `waiting` (a thread is in NvmeStore::wait) and `ticket`. The first
// failure is kept in `error` and thrown, then and by every later call. Returns whether an I/O was
// settled here (false: none was in flight).
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>

#include "core/error.h"
#include "io/file_store.h"

namespace sf {

template <typename Slot>
bool settle_nvme_slot(FileStore& store, std::unique_lock<std::mutex>& lk,
                      std::condition_variable& cv, Slot& s, std::string& error) {
  const bool had_io = s.io;
  while (s.io) {
    if (s.waiting) {
      cv.wait(lk);
      continue;
    }
    s.waiting = true;
    const FileStore::Ticket t = s.ticket;
    lk.unlock();
    std::string failure;
    try {
      store.wait(t);
    } catch (const Error& e) {
      failure = e.what();
    }
    lk.lock();
    s.waiting = false;
    s.io = false;
    if (!failure.empty() && error.empty()) error = failure;
    cv.notify_all();
  }
  if (!error.empty()) throw Error(error);
  return had_io;
}

}  // namespace sf
