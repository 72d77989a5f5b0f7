// defines: sf::cuda_device_properties — a device's name, SM count, boost clock and compute
// capability, as the CUDA runtime reports them (for the progress line's MFU peak).
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"

namespace sf {

CudaDeviceProperties cuda_device_properties(int device) {
  cudaDeviceProp prop{};
  SF_CUDA_CHECK(cudaGetDeviceProperties(&prop, device), "cuda_device_properties ", device);
  CudaDeviceProperties p;
  p.name = prop.name;
  p.sm_count = prop.multiProcessorCount;
  p.major = prop.major;
  p.minor = prop.minor;
  // cudaDeviceProp::clockRate is gone from CUDA 13: the attribute is the same figure (kHz).
  SF_CUDA_CHECK(cudaDeviceGetAttribute(&p.clock_khz, cudaDevAttrClockRate, device),
                "cuda_device_properties ", device);
  return p;
}

}  // namespace sf
