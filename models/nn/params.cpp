#include "models/nn/params.h"

#include "models/core/safetensors.h"

namespace gen3d::models::nn {

Tensor ParamSource::take(const std::string& name, const Shape& shape) {
  params_ += shape.numel();
  bytes_ += static_cast<std::size_t>(shape.numel()) * sizeof(float);
  return fetch(name, shape);
}

const Tensor& ParamSource::take_transient(const std::string& name, const Shape& shape) {
  params_ += shape.numel();
  bytes_ += static_cast<std::size_t>(shape.numel()) * sizeof(float);
  transient_ = fetch_transient(name, shape);
  return transient_;
}

void ParamSource::kept_as(std::int64_t elements, std::size_t bytes_per_element) {
  const auto n = static_cast<std::size_t>(elements);
  bytes_ = bytes_ - n * sizeof(float) + n * bytes_per_element;
}

bool CheckpointParams::has(const std::string& name) const {
  return weights_.contains(name);
}

void CheckpointParams::skip(const std::string& name) {
  weights_.skip(name);
}

Tensor CheckpointParams::fetch(const std::string& name, const Shape& shape) {
  return weights_.take(name, shape);
}

Tensor CheckpointParams::fetch_transient(const std::string& name, const Shape& shape) {
  if (scratch_.numel() < shape.numel()) {
    scratch_ = Tensor();  // freed before the larger one is made
    scratch_ = Tensor(Shape{shape.numel()});
  }
  weights_.take_into(name, shape, scratch_.data());
  return Tensor::view(scratch_.data(), shape);
}

Tensor RandomParams::fetch(const std::string& name, const Shape& shape) {
  Tensor t(shape);
  fill_(name, t);
  return t;
}

Tensor ShapeRecorder::fetch(const std::string& name, const Shape& shape) {
  list.emplace_back(prefix_ + name, shape);
  return Tensor();
}

}  // namespace gen3d::models::nn
