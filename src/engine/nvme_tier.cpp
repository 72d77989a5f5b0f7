#include "engine/nvme_tier.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "core/host_memory.h"
#include "engine/nvme_settle.h"

namespace sf {

namespace {

constexpr uint64_t kAlign = NvmeStore::kAlignment;

uint64_t round_up(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
uint64_t part_bytes(int64_t numel) { return round_up(uint64_t(numel) * 4); }

// Of the state parts (master, m, v), how many unit u keeps on the disk: 0, 2 (m, v) or 3.
int disk_parts(const std::vector<bool>& on_nvme, const std::vector<bool>& master_on_nvme,
               size_t u) {
  if (u >= on_nvme.size() || !on_nvme[u]) return 0;
  return u < master_on_nvme.size() && master_on_nvme[u] ? 3 : 2;
}

}  // namespace

struct NvmeTier::Part {
  NvmeRegion region;
  uint64_t bytes = 0;            // one of master, m, v, rounded to 4 KiB (0: not on NVMe)
  float* host_master = nullptr;  // the master where it stays in host memory ([m | v] on disk)
  // Where part `which` (0 master, 1 m, 2 v) lies in the region and in a slot holding it.
  uint64_t at(int which) const { return uint64_t(which - (host_master ? 1 : 0)) * bytes; }
  uint64_t state_bytes() const { return (host_master ? 2 : 3) * bytes; }
};

struct NvmeTier::Slot {
  char* buf = nullptr;
  int unit = -1;         // whose bytes it holds, is reading or is writing
  int64_t version = -1;  // load slots: the unit's version the read was issued at
  bool io = false;       // a read or write of this slot is in flight (not yet settled)
  bool writing = false;  // that I/O is a write-back
  bool waiting = false;  // a thread is in NvmeStore::wait for it
  bool consumed = false;  // load slots: its master was used since it was read
  NvmeStore::Ticket ticket = 0;
  int pins = 0;
  uint64_t used = 0;
};

namespace {

// The largest state on disk of one unit (an update slot) and the largest master there (a load
// slot).
struct Largest {
  uint64_t state = 0, master = 0;
};
Largest largest(const std::vector<UnitLayout>& layouts, const std::vector<bool>& on_nvme,
                const std::vector<bool>& master_on_nvme) {
  Largest l;
  for (size_t u = 0; u < layouts.size(); ++u) {
    const int parts = disk_parts(on_nvme, master_on_nvme, u);
    const uint64_t part = part_bytes(layouts[u].numel);
    l.state = std::max(l.state, uint64_t(parts) * part);
    if (parts == 3) l.master = std::max(l.master, part);
  }
  return l;
}

}  // namespace

uint64_t NvmeTier::staging_bytes(const std::vector<UnitLayout>& layouts,
                                 const std::vector<bool>& on_nvme,
                                 const std::vector<bool>& master_on_nvme, int update_slots,
                                 int load_slots) {
  const Largest l = largest(layouts, on_nvme, master_on_nvme);
  if (l.state == 0) return 0;
  return uint64_t(update_slots) * l.state + uint64_t(load_slots) * l.master + kAlign;
}

uint64_t NvmeTier::disk_bytes(const std::vector<UnitLayout>& layouts,
                              const std::vector<bool>& on_nvme,
                              const std::vector<bool>& master_on_nvme) {
  uint64_t total = 0;
  for (size_t u = 0; u < layouts.size(); ++u)
    total += uint64_t(disk_parts(on_nvme, master_on_nvme, u)) * part_bytes(layouts[u].numel);
  return total;
}

NvmeTier::NvmeTier(Backend& be, const std::filesystem::path& dir,
                   const std::vector<UnitLayout>& layouts, const std::vector<bool>& on_nvme,
                   const std::vector<float*>& host_master, int update_slots, int load_slots,
                   std::vector<int> update_order)
    : order_(std::move(update_order)), version_(layouts.size(), 0) {
  std::vector<bool> master_on_nvme(layouts.size(), false);
  for (size_t u = 0; u < layouts.size(); ++u)
    master_on_nvme[u] = u < on_nvme.size() && on_nvme[u] &&
                        (u >= host_master.size() || host_master[u] == nullptr);
  const Largest l = largest(layouts, on_nvme, master_on_nvme);
  SF_CHECK(l.state > 0, "NVMe tier: no unit is on NVMe");
  SF_CHECK(update_slots >= 1 && (load_slots >= 1 || l.master == 0), "NVMe tier: ", update_slots,
           " update and ", load_slots, " load slots; at least one update slot is needed, and a ",
           "load slot where a master is on the disk");
  staging_ = be.alloc(MemoryKind::kPinnedHost,
                      staging_bytes(layouts, on_nvme, master_on_nvme, update_slots, load_slots),
                      "NVMe staging (update and load slots)");
  char* p = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(staging_.data())));
  update_.resize(size_t(update_slots));
  for (Slot& s : update_) {
    s.buf = p;
    p += l.state;
  }
  load_.resize(size_t(l.master > 0 ? load_slots : 0));
  for (Slot& s : load_) {
    s.buf = p;
    p += l.master;
  }
  store_ = std::make_unique<NvmeStore>(dir);
  parts_.resize(layouts.size());
  for (size_t u = 0; u < layouts.size(); ++u) {
    if (u >= on_nvme.size() || !on_nvme[u]) continue;
    Part& part = parts_[u];
    part.bytes = part_bytes(layouts[u].numel);
    part.host_master = master_on_nvme[u] ? nullptr : host_master[u];
    part.region = store_->alloc(part.state_bytes());  // a full disk is refused here
  }
}

NvmeTier::~NvmeTier() {
  // Every user has stopped (the engine drained its streams and stopped the worker; a failed
  // update may have left its slot pinned): settle what is in flight, errors were reported.
  std::unique_lock lk(mu_);
  for (std::vector<Slot>* pool : {&update_, &load_})
    for (Slot& s : *pool) {
      try {
        settle(lk, s);
      } catch (...) {
      }
    }
}

void NvmeTier::throw_if_broken() const {
  if (!error_.empty()) throw Error(error_);
}

void NvmeTier::settle(std::unique_lock<std::mutex>& lk, Slot& s) {
  settle_nvme_slot(*store_, lk, cv_, s, error_);
}

NvmeTier::Slot* NvmeTier::find(std::vector<Slot>& pool, int u) {
  for (Slot& s : pool)
    if (s.unit == u) return &s;
  return nullptr;
}

void NvmeTier::settle_writes_of(std::unique_lock<std::mutex>& lk, int u) {
  Slot* s = find(update_, u);
  if (s && s->io && s->writing) settle(lk, *s);
}

NvmeTier::Slot* NvmeTier::take(std::unique_lock<std::mutex>& lk, std::vector<Slot>& pool,
                               bool block, const std::vector<int>& keep) {
  const bool load_pool = &pool == &load_;
  for (;;) {
    throw_if_broken();
    Slot* best = nullptr;
    for (Slot& s : pool) {
      if (s.pins > 0 || s.waiting) continue;
      if (s.unit >= 0 && std::find(keep.begin(), keep.end(), s.unit) != keep.end()) continue;
      // A read ahead never evicts another read ahead that has not been used yet.
      if (!block && load_pool && s.unit >= 0 && !s.consumed) continue;
      if (!block && s.io && !store_->done(s.ticket)) continue;
      const bool empty = s.unit < 0;
      if (!best || (empty && best->unit >= 0) ||
          (empty == (best->unit < 0) && s.used < best->used))
        best = &s;
    }
    if (!best) {
      if (!block) return nullptr;
      cv_.wait(lk);
      continue;
    }
    settle(lk, *best);  // may unlock: check again that it is still free
    if (best->pins > 0 || best->io || best->waiting) continue;
    best->unit = -1;
    best->version = -1;
    best->consumed = false;
    return best;
  }
}

void NvmeTier::read_state_into(Slot& s, int u) {
  const Part& p = parts_[size_t(u)];
  s.unit = u;
  s.io = true;
  s.writing = false;
  s.used = ++clock_;
  s.ticket = store_->read(p.region, 0, s.buf, p.state_bytes());
}

void NvmeTier::read_master_into(Slot& s, int u) {
  const Part& p = parts_[size_t(u)];
  SF_CHECK(!p.host_master, "internal: unit ", u, "'s master is in host memory, not on NVMe");
  s.unit = u;
  s.version = version_[size_t(u)];
  s.io = true;
  s.writing = false;
  s.consumed = false;
  s.used = ++clock_;
  s.ticket = store_->read(p.region, 0, s.buf, p.bytes);
}

void NvmeTier::acquire_state(UnitState& h, int u) {
  std::unique_lock lk(mu_);
  throw_if_broken();
  SF_CHECK(parts_[size_t(u)].bytes > 0, "internal: unit ", u, " is not on NVMe");
  // The units the reads ahead are for: the next ones of the update order.
  std::vector<int> ahead{u};
  const auto at = std::find(order_.begin(), order_.end(), u);
  if (at != order_.end())
    for (size_t k = 1; k < update_.size() && k < order_.size(); ++k)
      ahead.push_back(order_[(size_t(at - order_.begin()) + k) % order_.size()]);
  Slot* s = find(update_, u);
  if (!s) {
    s = take(lk, update_, /*block=*/true, ahead);
    read_state_into(*s, u);
  }
  s->pins = 1;
  s->used = ++clock_;
  try {
    settle(lk, *s);  // its read, or the write-back of its last update (the buffer is then current)
  } catch (...) {
    s->pins = 0;
    throw;
  }
  const Part& p = parts_[size_t(u)];
  h.master = p.host_master ? p.host_master : reinterpret_cast<float*>(s->buf + p.at(0));
  h.m = reinterpret_cast<float*>(s->buf + p.at(1));
  h.v = reinterpret_cast<float*>(s->buf + p.at(2));
  for (size_t k = 1; k < ahead.size(); ++k) {
    if (ahead[k] == u || find(update_, ahead[k])) continue;
    Slot* f = take(lk, update_, /*block=*/false, ahead);
    if (!f) break;
    read_state_into(*f, ahead[k]);
  }
}

void NvmeTier::release_state(UnitState& h, int u) {
  {
    std::lock_guard lk(mu_);
    Slot* s = find(update_, u);
    SF_CHECK(s && s->pins == 1, "internal: NVMe unit ", u, " released without being acquired");
    const Part& p = parts_[size_t(u)];
    ++version_[size_t(u)];  // masters read before this write are stale from here on
    s->io = true;
    s->writing = true;
    s->used = ++clock_;
    s->ticket = store_->write(p.region, 0, s->buf, p.state_bytes());
    s->pins = 0;
  }
  cv_.notify_all();
  const Part& p = parts_[size_t(u)];
  h.master = p.host_master;  // null where it is on the disk: only in a slot while updated
  h.m = h.v = nullptr;
}

const float* NvmeTier::acquire_master(int u) {
  std::unique_lock lk(mu_);
  SF_CHECK(parts_[size_t(u)].bytes > 0 && !parts_[size_t(u)].host_master, "internal: unit ", u,
           "'s master is not on NVMe");
  for (;;) {
    throw_if_broken();
    Slot* s = find(load_, u);
    if (s && s->version == version_[size_t(u)]) {
      s->pins++;
      s->consumed = true;
      s->used = ++clock_;
      try {
        settle(lk, *s);
      } catch (...) {
        s->pins--;
        throw;
      }
      return reinterpret_cast<const float*>(s->buf);
    }
    if (s) {  // a read of an older version: drop it once nothing uses it
      if (s->pins > 0) {
        cv_.wait(lk);
        continue;
      }
      settle(lk, *s);
      if (s->pins == 0 && s->unit == u && s->version != version_[size_t(u)]) s->unit = -1;
      continue;
    }
    settle_writes_of(lk, u);  // its last write-back is on the disk before the read
    Slot* f = take(lk, load_, /*block=*/true, {});
    if (find(load_, u)) {  // another thread read it meanwhile
      continue;
    }
    read_master_into(*f, u);
  }
}

void NvmeTier::release_master(int u) {
  {
    std::lock_guard lk(mu_);
    for (Slot& s : load_)
      if (s.unit == u && s.pins > 0) {
        --s.pins;
        break;
      }
  }
  cv_.notify_all();
}

void NvmeTier::prefetch_master(int u) {
  std::unique_lock lk(mu_);
  if (!error_.empty() || parts_[size_t(u)].bytes == 0 || parts_[size_t(u)].host_master) return;
  if (Slot* s = find(load_, u); s && s->version == version_[size_t(u)]) return;
  if (find(load_, u)) return;  // an older read not yet dropped: acquire_master deals with it
  // Being updated or written back: its bytes on disk are about to change.
  if (Slot* w = find(update_, u); w && (w->pins > 0 || (w->io && w->writing))) return;
  try {
    Slot* f = take(lk, load_, /*block=*/false, {});
    if (f && !find(load_, u)) read_master_into(*f, u);
  } catch (const Error&) {  // the error is kept and thrown by the next acquire
  }
}

void NvmeTier::drain() {
  std::unique_lock lk(mu_);
  for (std::vector<Slot>* pool : {&update_, &load_})
    for (Slot& s : *pool) {
      cv_.wait(lk, [&] { return s.pins == 0; });
      settle(lk, s);
      s.unit = -1;
      s.version = -1;
    }
}

void NvmeTier::with_state(int u, bool write_back,
                          const std::function<void(float*, float*, float*)>& fn) {
  drain();
  std::unique_lock lk(mu_);
  Slot& s = update_.front();
  s.pins = 1;  // `fn` runs unlocked (it may read_part): nothing else takes the slot meanwhile
  read_state_into(s, u);
  try {
    settle(lk, s);
  } catch (...) {
    s.pins = 0;
    throw;
  }
  lk.unlock();
  const Part& p = parts_[size_t(u)];
  try {
    fn(p.host_master ? p.host_master : reinterpret_cast<float*>(s.buf + p.at(0)),
       reinterpret_cast<float*>(s.buf + p.at(1)), reinterpret_cast<float*>(s.buf + p.at(2)));
  } catch (...) {
    lk.lock();
    s.pins = 0;
    s.unit = -1;
    throw;
  }
  lk.lock();
  if (write_back) {
    ++version_[size_t(u)];
    s.io = true;
    s.writing = true;
    s.ticket = store_->write(p.region, 0, s.buf, p.state_bytes());
  }
  s.pins = 0;
  settle(lk, s);
  s.unit = -1;
}

void NvmeTier::read_part(int u, int which, int64_t offset, int64_t count, float* dst) {
  const Part& p = parts_[size_t(u)];
  SF_CHECK(p.bytes > 0 && which >= 0 && which < 3 && offset >= 0 &&
               uint64_t(offset + count) * 4 <= p.bytes,
           "internal: NVMe read_part out of range");
  if (which == 0 && p.host_master) {  // not on the disk; the caller has settled the updates
    std::memcpy(dst, p.host_master + offset, size_t(count) * 4);
    return;
  }
  {
    std::unique_lock lk(mu_);
    throw_if_broken();
    settle_writes_of(lk, u);  // the disk holds its last update
  }
  // O_DIRECT: the aligned range around it, into a buffer of its own (the tensor's size: the
  // plan's host.state_copy).
  const uint64_t begin = p.at(which) + uint64_t(offset) * 4;
  const uint64_t first = begin / kAlign * kAlign;
  const uint64_t end = round_up(begin + uint64_t(count) * 4);
  std::unique_ptr<char, void (*)(void*)> buf(
      static_cast<char*>(std::aligned_alloc(kAlign, end - first)), std::free);
  SF_CHECK(buf, "out of host memory reading ", end - first, " bytes of NVMe state");
  store_->wait(store_->read(p.region, first, buf.get(), end - first));
  std::memcpy(dst, buf.get() + (begin - first), size_t(count) * 4);
}

NvmeStore::Stats NvmeTier::stats() const { return store_->stats(); }

}  // namespace sf
