// defines: the no-CUDA definitions of cuda_backend.h (make_cuda_backend throws, no devices).
// CMake adds this file only to builds without nvcc; the guard keeps it empty otherwise.
#ifndef SF_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"

#include "core/error.h"

namespace sf {

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions&) {
  SF_FAIL("make_cuda_backend: SlideFormer was built without CUDA (nvcc was not found at "
          "configure time); rebuild with the CUDA toolkit on PATH, or use the CPU backend");
}

size_t cuda_backend_scratch_bytes(const CudaBackendOptions&) { return 0; }

DeviceMemoryInfo cuda_device_memory(int) { return {}; }

int cuda_device_count() { return 0; }
CudaDeviceProperties cuda_device_properties(int) { return {}; }

void* cuda_stream_handle(Stream&) {
  SF_FAIL("cuda_stream_handle: SlideFormer was built without CUDA");
}

bool gds_available(std::string* why) {
  if (why) *why = "SlideFormer was built without CUDA";
  return false;
}

std::unique_ptr<FileStore> make_gds_store(const std::filesystem::path&) {
  SF_FAIL("GPUDirect Storage: SlideFormer was built without CUDA; use nvme_gds: off");
}

std::unique_ptr<Collective> make_nccl_collective(const std::vector<Backend*>&,
                                                 const std::vector<int>&, std::string* why) {
  if (why) *why = "SlideFormer was built without CUDA";
  return nullptr;
}

}  // namespace sf
#endif  // SF_HAVE_CUDA
