#include "models/core/tensor.h"

#include <cassert>
#include <cstdlib>
#include <cstring>
#include <new>

#include "models/core/error.h"

namespace gen3d::models {

Shape::Shape(std::initializer_list<std::int64_t> dims) {
  *this = from(std::span<const std::int64_t>(dims.begin(), dims.size()));
}

Shape Shape::from(std::span<const std::int64_t> dims) {
  if (dims.size() > static_cast<std::size_t>(kMaxRank))
    throw ModelError("tensor rank " + std::to_string(dims.size()) + " exceeds the maximum of 4");
  Shape s;
  s.rank_ = static_cast<int>(dims.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0) throw ModelError("negative tensor dimension " + std::to_string(dims[i]));
    s.dims_[i] = dims[i];
  }
  return s;
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[static_cast<std::size_t>(i)];
  return n;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[static_cast<std::size_t>(i)]);
  }
  return s + "]";
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i)
    if (dims_[static_cast<std::size_t>(i)] != o.dims_[static_cast<std::size_t>(i)]) return false;
  return true;
}

void Tensor::Release::operator()(float* p) const {
  device_memory(device).release(p);
}

Tensor::Tensor(const Shape& shape) : Tensor(shape, Device::kCpu) {}

Tensor::Tensor(const Shape& shape, Device device)
    : shape_(shape), owner_(nullptr, Release{device}), device_(device) {
  const std::size_t bytes = static_cast<std::size_t>(shape.numel()) * sizeof(float);
  owner_.reset(static_cast<float*>(device_memory(device).allocate(bytes)));
  data_ = owner_.get();
}

Tensor Tensor::view(float* data, const Shape& shape) {
  Tensor t;
  t.shape_ = shape;
  t.data_ = data;
  return t;
}

Tensor Tensor::view(const float* data, const Shape& shape) {
  return view(const_cast<float*>(data), shape);
}

Tensor Tensor::view(float* data, const Shape& shape, Device device) {
  Tensor t = view(data, shape);
  t.device_ = device;
  return t;
}

Tensor Tensor::view(const float* data, const Shape& shape, Device device) {
  return view(const_cast<float*>(data), shape, device);
}

Tensor::Tensor(const Tensor& other) : shape_(other.shape_), device_(other.device_) {
  if (other.owner_) {
    *this = other.clone();
  } else {
    data_ = other.data_;
  }
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this == &other) return *this;
  if (other.owner_) {
    *this = other.clone();
  } else {
    owner_.reset();
    shape_ = other.shape_;
    data_ = other.data_;
    device_ = other.device_;
  }
  return *this;
}

std::int64_t Tensor::dim(int i) const {
  const int r = shape_.rank();
  const int k = i < 0 ? i + r : i;
  if (k < 0 || k >= r)
    throw ModelError("dim(" + std::to_string(i) + ") out of range for shape " + shape_.str());
  return shape_[k];
}

Tensor Tensor::reshaped(const Shape& shape) {
  if (shape.numel() != shape_.numel())
    throw ModelError("cannot reshape " + shape_.str() + " to " + shape.str());
  return view(data_, shape, device_);
}

Tensor Tensor::clone() const {
  return to(device_);
}

Tensor Tensor::to(Device device) const {
  Tensor t(shape_, device);
  if (data_ && shape_.numel() > 0) {
    // The backend that is not the host's does the copy (either side may be that device).
    const Device via = device != Device::kCpu ? device : device_;
    device_memory(via).copy(t.data_, device, data_, device_,
                            static_cast<std::size_t>(shape_.numel()) * sizeof(float));
  }
  return t;
}

Tensor Tensor::on(Device device) const {
  return device == device_ ? view(data_, shape_, device_) : to(device);
}

Tensor Tensor::slice0(std::int64_t begin, std::int64_t end) {
  if (shape_.rank() < 1 || begin < 0 || end < begin || end > shape_[0])
    throw ModelError("slice0(" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") out of range for shape " + shape_.str());
  std::array<std::int64_t, Shape::kMaxRank> d{};
  for (int i = 0; i < shape_.rank(); ++i) d[static_cast<std::size_t>(i)] = shape_[i];
  d[0] = end - begin;
  const Shape s =
      Shape::from(std::span<const std::int64_t>(d.data(), static_cast<std::size_t>(shape_.rank())));
  const std::int64_t row = shape_[0] == 0 ? 0 : shape_.numel() / shape_[0];
  return view(data_ + begin * row, s, device_);
}

float& Tensor::at(std::int64_t i0) {
  assert(rank() == 1 && i0 >= 0 && i0 < shape_[0]);
  return data_[i0];
}
float& Tensor::at(std::int64_t i0, std::int64_t i1) {
  assert(rank() == 2 && i0 < shape_[0] && i1 < shape_[1]);
  return data_[i0 * shape_[1] + i1];
}
float& Tensor::at(std::int64_t i0, std::int64_t i1, std::int64_t i2) {
  assert(rank() == 3 && i0 < shape_[0] && i1 < shape_[1] && i2 < shape_[2]);
  return data_[(i0 * shape_[1] + i1) * shape_[2] + i2];
}
float& Tensor::at(std::int64_t i0, std::int64_t i1, std::int64_t i2, std::int64_t i3) {
  assert(rank() == 4 && i0 < shape_[0] && i1 < shape_[1] && i2 < shape_[2] && i3 < shape_[3]);
  return data_[((i0 * shape_[1] + i1) * shape_[2] + i2) * shape_[3] + i3];
}

}  // namespace gen3d::models
