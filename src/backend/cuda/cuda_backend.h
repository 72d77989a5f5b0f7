// defines: sf::CudaBackendOptions, sf::make_cuda_backend, sf::cuda_device_count,
// sf::cuda_stream_handle, sf::make_nccl_collective, sf::gds_available, sf::make_gds_store — the
// CUDA implementation of sf::Backend (compute dtype BF16), NCCL's reduction across GPUs, and
// GPUDirect Storage.
//
// This header compiles and its functions link in every build: without CUDA (SF_HAVE_CUDA unset)
// make_cuda_backend throws sf::Error "built without CUDA" and cuda_device_count() returns 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/collective.h"
#include "io/file_store.h"

namespace sf {

// Every workspace the backend needs is sized from these and allocated once, in the constructor:
// no cudaMalloc happens inside a step.
struct CudaBackendOptions {
  int device = 0;
  int64_t max_tokens = 0;  // T of the largest step (attention and CE workspaces)
  int64_t hidden = 0;      // C: the widest row an RMSNorm or the head sees
  int64_t vocab = 0;       // V of the head (cross-entropy logits chunk)
  // Query heads of the model (attention backward keeps Δ[T, heads] in F32); 0 = hidden (safe,
  // heads <= hidden always, at hidden/head_dim times the memory).
  int64_t max_heads = 0;
  // Device bytes of linear_cross_entropy's workspace: a BF16 dlogits chunk [chunk, V] and an F32
  // logits sub-chunk [sub, V] with 2·V·chunk + 4·V·sub <= bytes, chunk ≈ bytes / (3·V) tokens
  // (capped at max_tokens). 384 MiB: 1024 + 256 rows at V = 128256, 0.37 GiB — under 10% of
  // the BF16 logits of 16384 tokens — at the GEMMs' speed of a 512 MiB F32 chunk (the dW GEMM
  // stays compute-bound at K = 1024).
  size_t ce_chunk_bytes = size_t(384) << 20;
  size_t cublaslt_workspace_bytes = size_t(64) << 20;
};

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options);

// The device bytes of the scratch make_cuda_backend(options) allocates (the planner counts them
// before the backend exists); 0 without CUDA.
size_t cuda_backend_scratch_bytes(const CudaBackendOptions& options);

// Device memory in use (by every process) and in total on `device`, creating this process's
// context there if it has none; zeros without CUDA.
DeviceMemoryInfo cuda_device_memory(int device);

// What a device's bf16 peak is estimated from where its name is not in a table (train/progress):
// its name, SM count, boost clock and compute capability; name empty without CUDA.
struct CudaDeviceProperties {
  std::string name;
  int sm_count = 0, clock_khz = 0, major = 0, minor = 0;
};
CudaDeviceProperties cuda_device_properties(int device);  // device_properties.cu

// Number of usable CUDA devices: 0 when built without CUDA, with no driver or no GPU; never throws.
int cuda_device_count();

// The cudaStream_t behind a Stream made by a CUDA backend, as void* (benchmarks record their own
// timing events on it). Throws sf::Error without CUDA.
void* cuda_stream_handle(Stream& s);

// The reduction over CUDA backends on distinct GPUs `devices` (backends[r] on devices[r]) through
// NCCL, loaded at run time ($SF_NCCL_LIB, else libnccl.so.2 from the loader's path, nccl.cpp);
// null, with the reason in `why`, where no NCCL loads or without CUDA. Throws where NCCL loads but
// cannot set the communicators up.
std::unique_ptr<Collective> make_nccl_collective(const std::vector<Backend*>& backends,
                                                 const std::vector<int>& devices,
                                                 std::string* why);

// GPUDirect Storage (gds_store.cpp): whether libcufile loads and its driver opens
// ($SF_CUFILE_LIB, else libcufile.so.0 from the loader's path), else why not; and a FileStore in
// `dir` whose buffers are device memory of the calling thread's current device, moved by cuFile
// (throws where it is not available). False / throws without CUDA.
bool gds_available(std::string* why);
std::unique_ptr<FileStore> make_gds_store(const std::filesystem::path& dir);

}  // namespace sf
