// defines: sf::Tensor — a non-owning, contiguous, row-major view of up to 4 dimensions.
// Where the bytes live (device or host) is the owner's business; ops say what they expect.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace sf {

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int ndim = 0;
  std::array<int64_t, 4> shape{1, 1, 1, 1};

  Tensor() = default;
  Tensor(void* d, DType t, std::initializer_list<int64_t> dims) : data(d), dtype(t) {
    SF_CHECK(dims.size() <= 4, "Tensor: at most 4 dimensions");
    for (int64_t s : dims) shape[ndim++] = s;
  }

  bool empty() const { return data == nullptr; }
  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  size_t bytes() const { return size_t(numel()) * dtype_size(dtype); }
  // Rows when viewed as a matrix whose row is the last dimension.
  int64_t rows() const { return ndim == 0 ? 1 : numel() / shape[ndim - 1]; }
  int64_t cols() const { return ndim == 0 ? 1 : shape[ndim - 1]; }

  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
  float* f32() const {
    SF_CHECK(dtype == DType::kF32, "expected an F32 tensor, got ", dtype_name(dtype));
    return static_cast<float*>(data);
  }
  int32_t* i32() const {
    SF_CHECK(dtype == DType::kI32, "expected an I32 tensor, got ", dtype_name(dtype));
    return static_cast<int32_t*>(data);
  }
  // Rows [begin, begin + n) when viewed as a matrix whose row is the last dimension.
  Tensor row_range(int64_t begin, int64_t n) const {
    return Tensor(static_cast<char*>(data) + size_t(begin * cols()) * dtype_size(dtype), dtype,
                  {n, cols()});
  }
  // The same bytes seen with another shape of equal element count.
  Tensor reshaped(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dtype, dims);
    SF_CHECK(t.numel() == numel(), "reshape ", shape_str(), " -> ", t.shape_str(),
             " changes the element count");
    return t;
  }
  std::string shape_str() const {
    std::string s = "[";
    for (int i = 0; i < ndim; ++i) s += (i ? "," : "") + std::to_string(shape[i]);
    return s + "]";
  }
};

}  // namespace sf
