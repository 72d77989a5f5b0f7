// defines: the test seams of the NVMe store (io/scratch_file.*, io/nvme_store.*): faults that a
// test cannot provoke on a healthy disk, injected where the kernel's answer is read. Off by
// default; process-wide, like inject_write_failure_after (io/atomic_file.h).
#pragma once

#include <cstdint>

namespace sf {

// While on, the scratch file's O_DIRECT open fails with EINVAL after creating the file, as tmpfs
// before Linux 6.6 does.
void inject_direct_io_refused(bool on);
// The next ScratchFile::grow_to fails with `err` (ENOSPC, EIO; 0 = off), as fallocate would.
void inject_reserve_failure(int err);
// The completion of the `nth` request from now (0 = the next one to complete) reports `result`
// instead of the kernel's: a negative errno (-ENOSPC, -EIO) or a byte count short of the
// request. nth < 0 turns it off.
void inject_completion_result(int64_t nth, int result);

namespace nvme_faults {
bool direct_io_refused();
int take_reserve_failure();  // the injected errno once, then 0
// `result` unchanged, or the injected one when this completion is the chosen one.
int completion_result(int result);
}  // namespace nvme_faults

}  // namespace sf
