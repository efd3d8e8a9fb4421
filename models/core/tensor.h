#pragma once
// models::Tensor: float32, contiguous, row-major, rank 0..4; owns its memory or views someone
// else's; lives on the CPU or on a device (data() is then a device pointer, for device kernels
// only: element access, span() and host code need a CPU tensor, see to()).

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

#include "models/core/device.h"

namespace gen3d::models {

// Up to 4 dimensions; rank 0 is a scalar (numel 1).
class Shape {
 public:
  static constexpr int kMaxRank = 4;
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims);  // throws ModelError on rank > 4 or dim < 0
  static Shape from(std::span<const std::int64_t> dims);

  int rank() const { return rank_; }
  std::int64_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
  std::int64_t numel() const;
  std::span<const std::int64_t> dims() const {
    return {dims_.data(), static_cast<std::size_t>(rank_)};
  }
  std::string str() const;  // "[2, 16, 32]"
  bool operator==(const Shape& o) const;

 private:
  std::array<std::int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

class Tensor {
 public:
  Tensor() = default;                         // empty (rank 0, no data)
  explicit Tensor(const Shape& shape);        // owning, zero-filled, 64-byte aligned
  Tensor(const Shape& shape, Device device);  // owning, zero-filled, on `device`
  static Tensor zeros(const Shape& shape) { return Tensor(shape); }
  // Non-owning view of `data` (must hold shape.numel() floats and outlive the view).
  static Tensor view(float* data, const Shape& shape);
  static Tensor view(const float* data, const Shape& shape);  // read-only by convention
  static Tensor view(float* data, const Shape& shape, Device device);
  static Tensor view(const float* data, const Shape& shape, Device device);

  // Copying an owning tensor copies the data; copying a view copies the view.
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  ~Tensor() = default;

  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  std::int64_t dim(int i) const;  // negative i counts from the end
  std::int64_t numel() const { return data_ ? shape_.numel() : 0; }
  bool empty() const { return data_ == nullptr; }
  bool is_view() const { return data_ != nullptr && !owner_; }

  float* data() { return data_; }
  const float* data() const { return data_; }
  std::span<float> span() { return {data_, static_cast<std::size_t>(numel())}; }
  std::span<const float> span() const { return {data_, static_cast<std::size_t>(numel())}; }

  // Same data, new shape (numel must match): a view into this tensor.
  Tensor reshaped(const Shape& shape);
  // Deep copy (always owning, same device).
  Tensor clone() const;
  Device device() const { return device_; }
  // An owning copy on `device` (a deep copy even when already there).
  Tensor to(Device device) const;
  // This tensor readable on `device`: a view of it when it lives there already, else a copy.
  Tensor on(Device device) const;
  // View of rows [begin, end) along dim 0.
  Tensor slice0(std::int64_t begin, std::int64_t end);

  // Element access with bounds checks in debug builds only.
  float& at(std::int64_t i0);
  float& at(std::int64_t i0, std::int64_t i1);
  float& at(std::int64_t i0, std::int64_t i1, std::int64_t i2);
  float& at(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3);
  float at(std::int64_t i0, std::int64_t i1) const { return const_cast<Tensor*>(this)->at(i0, i1); }
  float at(std::int64_t i0, std::int64_t i1, std::int64_t i2) const {
    return const_cast<Tensor*>(this)->at(i0, i1, i2);
  }

 private:
  struct Release {
    Device device;  // value-initialized: kCpu
    void operator()(float* p) const;
  };
  Shape shape_;
  std::unique_ptr<float[], Release> owner_;
  float* data_ = nullptr;
  Device device_ = Device::kCpu;
};

}  // namespace gen3d::models
