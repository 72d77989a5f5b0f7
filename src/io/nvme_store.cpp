#include "io/nvme_store.h"

#include <liburing.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/host_memory.h"
#include "io/nvme_faults.h"

namespace sf {
namespace {

std::string errno_text(int err) {
  const char* name = strerrorname_np(err);
  return str_cat(std::strerror(err), " (", name ? name : "errno", ")");
}

// One request of at most max_request_bytes; `done` grows when the kernel transfers part of it.
struct Request {
  NvmeStore::Ticket ticket = 0;
  bool write = false;
  uint64_t offset = 0;  // in the file
  char* buf = nullptr;
  uint32_t len = 0, done = 0;
};

struct TicketState {
  uint64_t remaining = 0;  // requests not yet complete
  std::string error;       // the first failure
};

}  // namespace

struct NvmeStore::Impl {
  Impl(const std::filesystem::path& d, NvmeStoreOptions o) : dir(d), opt(o), file(d) {}

  std::filesystem::path dir;
  NvmeStoreOptions opt;
  ScratchFile file;
  ExtentAllocator extents{kAlignment};
  io_uring ring{};

  mutable std::mutex mu;
  std::condition_variable cv;
  std::deque<Request> pending;  // waiting for a place in the queue
  std::vector<Request> slots;   // in the kernel; user_data = index + 1 (0 wakes the reaper)
  std::vector<int> free_slots;
  int in_flight = 0;    // requests in slots: in the kernel, or prepared and not yet taken by it
  int unsubmitted = 0;  // of those, prepared but not yet taken (the kernel was busy)
  std::map<Ticket, TicketState> tickets;  // std::map: wait() keeps an iterator across inserts
  Ticket next_ticket = 1;
  std::string broken;  // the ring itself failed: every later call throws this
  bool stopping = false, reaper_exited = false;
  Stats stats;
  std::thread reaper;

  std::string where() const {
    return str_cat(file.path().string(), " (the unlinked scratch file of --nvme-dir ", dir.string(),
                   ")");
  }
  std::string failure(const Request& q, int err) const;
  void fail(const Request& q, const std::string& why);
  void pump();  // under mu: moves pending requests into the kernel, up to the queue depth
  void complete(int slot, int res);
  void reap();
  Ticket submit(bool write, const NvmeRegion& r, uint64_t offset, char* buf, uint64_t bytes);
};

std::string NvmeStore::Impl::failure(const Request& q, int err) const {
  const char* op = q.write ? "write" : "read";
  std::string todo;
  if (err == ENOSPC || err == EDQUOT) {
    todo =
        "the disk is full: free space on it or point --nvme-dir at a larger one, then resume "
        "from the last checkpoint";
  } else if (err == EIO) {
    todo =
        "the disk reported an I/O error: check it (dmesg, smartctl), then resume from the "
        "last checkpoint with --nvme-dir on a healthy disk";
  } else {
    todo = "check the disk (dmesg), then resume from the last checkpoint";
  }
  return str_cat(where(), ": ", op, " of ", q.len - q.done, " bytes at offset ", q.offset + q.done,
                 " failed: ", errno_text(err), "; ", todo);
}

void NvmeStore::Impl::fail(const Request& q, const std::string& why) {
  TicketState& t = tickets[q.ticket];
  if (t.error.empty()) t.error = why;
  --t.remaining;
}

void NvmeStore::Impl::pump() {
  int prepared = 0;
  while (in_flight < opt.queue_depth && !pending.empty()) {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (sqe == nullptr) break;
    const int slot = free_slots.back();
    free_slots.pop_back();
    Request& q = slots[size_t(slot)] = pending.front();
    pending.pop_front();
    if (q.write) {
      io_uring_prep_write(sqe, file.fd(), q.buf + q.done, q.len - q.done, q.offset + q.done);
    } else {
      io_uring_prep_read(sqe, file.fd(), q.buf + q.done, q.len - q.done, q.offset + q.done);
    }
    io_uring_sqe_set_data64(sqe, uint64_t(slot) + 1);
    ++in_flight, ++prepared;
  }
  if (in_flight > stats.max_in_flight) stats.max_in_flight = in_flight;
  unsubmitted += prepared;
  while (unsubmitted > 0) {
    const int r = io_uring_submit(&ring);
    if (r > 0) {
      unsubmitted -= r;
    } else if (r == -EINTR) {
      continue;
    } else if ((r == 0 || r == -EAGAIN || r == -EBUSY) && in_flight > unsubmitted) {
      break;  // the kernel is busy: the next completion submits them
    } else {
      broken = str_cat(where(), ": io_uring_submit failed: ", errno_text(r < 0 ? -r : EAGAIN),
                       "; the store cannot go on: resume from the last checkpoint");
      cv.notify_all();  // waiters see it
      break;
    }
  }
}

void NvmeStore::Impl::complete(int slot, int res) {
  Request q = slots[size_t(slot)];
  free_slots.push_back(slot);
  --in_flight;
  res = nvme_faults::completion_result(res);
  if (res == -EINTR || res == -EAGAIN) {
    pending.push_front(q);  // try again, first in line
  } else if (res < 0) {
    fail(q, failure(q, -res));
  } else if (res == 0 || (res < int(q.len - q.done) && res % int(kAlignment) != 0)) {
    // No progress, or progress that leaves the rest unaligned for O_DIRECT: an error.
    fail(q, str_cat(where(), ": short ", q.write ? "write" : "read", ": ", res, " of ",
                    q.len - q.done, " bytes at offset ", q.offset + q.done,
                    q.write ? "; the disk may be full: free space on it"
                            : "; the file is shorter than its regions (was it truncated?)",
                    ", then resume from the last checkpoint"));
  } else {
    (q.write ? stats.bytes_written : stats.bytes_read) += uint64_t(res);
    q.done += uint32_t(res);
    if (q.done < q.len) {
      pending.push_front(q);  // the kernel took part of it: the rest goes again
    } else {
      --tickets[q.ticket].remaining;
    }
  }
}

void NvmeStore::Impl::reap() {
  // The destructor wakes this thread with a no-op; the timeout stops it even where the ring can
  // no longer take one (EXT_ARG: no SQE is used for the timeout, the submitters own the SQ).
  __kernel_timespec tick{0, 100'000'000};
  for (;;) {
    io_uring_cqe* cqe = nullptr;
    const int r = io_uring_wait_cqe_timeout(&ring, &cqe, &tick);
    if (r == -EINTR) continue;
    std::lock_guard lock(mu);
    if (r == -ETIME) {
      if (!stopping) continue;
      reaper_exited = true;
      cv.notify_all();
      return;
    }
    if (r < 0) {
      broken = str_cat(where(), ": waiting for io_uring completions failed: ", errno_text(-r),
                       "; the store cannot go on: resume from the last checkpoint");
      reaper_exited = true;
      cv.notify_all();
      return;
    }
    bool stop = false;
    do {  // everything that completed, under one lock
      const uint64_t ud = io_uring_cqe_get_data64(cqe);
      const int res = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      if (ud == 0)
        stop = true;
      else
        complete(int(ud - 1), res);
    } while (io_uring_peek_cqe(&ring, &cqe) == 0);
    if (broken.empty()) pump();
    reaper_exited = stop;
    cv.notify_all();
    if (stop) return;
  }
}

NvmeStore::Ticket NvmeStore::Impl::submit(bool write, const NvmeRegion& r, uint64_t offset,
                                          char* buf, uint64_t bytes) {
  const char* op = write ? "NvmeStore::write" : "NvmeStore::read";
  SF_CHECK(bytes > 0 && bytes % kAlignment == 0 && offset % kAlignment == 0, op, ": ", bytes,
           " bytes at offset ", offset, " of a region: O_DIRECT needs both to be multiples of ",
           kAlignment, "; round the request (regions are rounded up to ", kAlignment, ")");
  SF_CHECK(reinterpret_cast<uintptr_t>(buf) % kAlignment == 0, op, ": the host buffer ",
           static_cast<void*>(buf), " is not aligned to ", kAlignment,
           " bytes (O_DIRECT); allocate it aligned (aligned_alloc, the pinned arenas)");
  SF_CHECK(offset <= r.bytes && bytes <= r.bytes - offset, op, ": ", bytes, " bytes at offset ",
           offset, " do not fit the region of ", r.bytes, " bytes at ", r.offset);
  std::unique_lock lock(mu);
  SF_CHECK(broken.empty(), broken);
  SF_CHECK(r.offset + r.bytes <= extents.end(), op, ": the region at ", r.offset, " (", r.bytes,
           " bytes) is not one of this store's");
  const Ticket t = next_ticket++;
  TicketState& st = tickets[t];
  for (uint64_t at = 0; at < bytes; at += opt.max_request_bytes) {
    Request q;
    q.ticket = t, q.write = write, q.offset = r.offset + offset + at, q.buf = buf + at;
    q.len = uint32_t(std::min(opt.max_request_bytes, bytes - at));
    pending.push_back(q);
    ++st.remaining;
    ++stats.requests;
  }
  pump();
  SF_CHECK(broken.empty(), broken);
  return t;
}

NvmeStore::NvmeStore(const std::filesystem::path& dir, NvmeStoreOptions opt) {
  SF_CHECK(opt.queue_depth >= 1 && opt.queue_depth <= 4096, "NVMe store: queue depth ",
           opt.queue_depth, " is out of range; use 1 to 4096 (32 is the default)");
  SF_CHECK(opt.max_request_bytes >= kAlignment && opt.max_request_bytes % kAlignment == 0 &&
               opt.max_request_bytes <= (256ull << 20),
           "NVMe store: request size ", opt.max_request_bytes, " bytes is not a multiple of ",
           kAlignment, " between 4 KiB and 256 MiB");
  impl_ = std::make_unique<Impl>(dir, opt);  // refuses a bad directory first
  Impl& s = *impl_;
  const int r = io_uring_queue_init(unsigned(opt.queue_depth), &s.ring, 0);
  SF_CHECK(r == 0, "--nvme-dir ", dir.string(),
           ": io_uring is not available (io_uring_setup: ", errno_text(-r),
           "); the NVMe store needs it: allow it (sysctl kernel.io_uring_disabled=0; a "
           "container's seccomp profile may block it) or run without --nvme-dir");
  if ((s.ring.features & IORING_FEAT_EXT_ARG) == 0) {
    io_uring_queue_exit(&s.ring);
    SF_FAIL("--nvme-dir ", dir.string(),
            ": this kernel's io_uring lacks IORING_FEAT_EXT_ARG (Linux 5.11 or later); the "
            "NVMe store needs it: run on a newer kernel or without --nvme-dir");
  }
  s.slots.resize(size_t(opt.queue_depth));
  for (int i = opt.queue_depth - 1; i >= 0; --i) s.free_slots.push_back(i);
  s.reaper = std::thread([&s] { s.reap(); });
}

NvmeStore::~NvmeStore() {
  Impl& s = *impl_;
  {
    std::unique_lock lock(s.mu);
    // The kernel may still write into (or read from) the callers' buffers: wait for it.
    s.cv.wait(lock, [&] {
      return s.reaper_exited ||
             (s.in_flight == s.unsubmitted && (s.pending.empty() || !s.broken.empty()));
    });
    s.stopping = true;
    io_uring_sqe* sqe = s.reaper_exited ? nullptr : io_uring_get_sqe(&s.ring);
    if (sqe != nullptr) {  // wakes the reaper at once, on user_data 0 (else its timeout does)
      io_uring_prep_nop(sqe);
      io_uring_sqe_set_data64(sqe, 0);
      io_uring_submit(&s.ring);
    }
  }
  s.reaper.join();
  io_uring_queue_exit(&s.ring);
}

NvmeRegion NvmeStore::alloc(uint64_t bytes) {
  std::lock_guard lock(impl_->mu);
  const Extent e = impl_->extents.peek(bytes);
  impl_->file.grow_to(e.offset + e.bytes);  // throws on a full disk: nothing is taken
  return impl_->extents.alloc(bytes);
}

void NvmeStore::free(const NvmeRegion& r) {
  std::lock_guard lock(impl_->mu);
  impl_->extents.free(r);
}

NvmeStore::Ticket NvmeStore::write(const NvmeRegion& r, uint64_t offset, const void* src,
                                   uint64_t bytes) {
  return impl_->submit(true, r, offset, static_cast<char*>(const_cast<void*>(src)), bytes);
}

NvmeStore::Ticket NvmeStore::read(const NvmeRegion& r, uint64_t offset, void* dst, uint64_t bytes) {
  return impl_->submit(false, r, offset, static_cast<char*>(dst), bytes);
}

void NvmeStore::wait(Ticket t) {
  Impl& s = *impl_;
  std::unique_lock lock(s.mu);
  auto it = s.tickets.find(t);
  SF_CHECK(it != s.tickets.end(), "NvmeStore::wait: ticket ", t,
           " is unknown (each ticket is waited once)");
  s.cv.wait(lock, [&] { return it->second.remaining == 0 || !s.broken.empty(); });
  const std::string error = it->second.remaining == 0 ? it->second.error : s.broken;
  s.tickets.erase(it);
  if (!error.empty()) throw Error(error);
}

bool NvmeStore::done(Ticket t) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->tickets.find(t);
  SF_CHECK(it != impl_->tickets.end(), "NvmeStore::done: ticket ", t, " is unknown");
  return it->second.remaining == 0 || !impl_->broken.empty();
}

NvmeStore::Stats NvmeStore::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->stats;
}

const ScratchFile& NvmeStore::file() const { return impl_->file; }
const NvmeStoreOptions& NvmeStore::options() const { return impl_->opt; }

std::string NvmeStore::describe() const {
  const ScratchFile& f = impl_->file;
  return str_cat("NVMe store in ", impl_->dir.string(), " (", f.fs_type(),
                 "): one unlinked O_DIRECT scratch file, io_uring at queue depth ",
                 impl_->opt.queue_depth, " in requests of at most ",
                 impl_->opt.max_request_bytes >> 10, " KiB",
                 f.reserves_blocks() ? ", blocks reserved at alloc"
                                     : ", sparse (the filesystem cannot reserve blocks: a full "
                                       "disk shows at a write)",
                 f.memory_backed() ? "; tmpfs is memory: these bytes take host memory" : "");
}

bool NvmeStore::io_uring_available(std::string* why) {
  io_uring ring{};
  const int r = io_uring_queue_init(2, &ring, 0);
  if (r == 0) {
    io_uring_queue_exit(&ring);
    return true;
  }
  if (why) *why = str_cat("io_uring_setup: ", errno_text(-r));
  return false;
}

}  // namespace sf
