#pragma once
// Where a network's parameters come from while it is built: a checkpoint, a seeded random
// generator, or a recorder of the names and shapes asked for. Every network claims its tensors
// through a ParamSource, which is also the one place that counts parameters and the bytes kept.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/core/dtype.h"
#include "models/core/tensor.h"

namespace gen3d::models {
class WeightMap;
}

namespace gen3d::models::nn {

class ParamSource {
 public:
  explicit ParamSource(WeightStorage storage = WeightStorage::kF32) : storage_(storage) {}
  virtual ~ParamSource() = default;
  ParamSource(const ParamSource&) = delete;
  ParamSource& operator=(const ParamSource&) = delete;

  // The parameter `name` (relative to the network) of `shape`, as float32. Counts its elements
  // as parameters and 4 bytes each as memory (see kept_as for weights held narrower). A recorder
  // returns an empty tensor: layers then skip packing.
  Tensor take(const std::string& name, const Shape& shape);
  // As take(), for a caller that reads the values only until its next take_transient() (to
  // convert or pack them): a checkpoint reads them into one reused buffer, where a fresh
  // float32 copy per weight made its first touches most of a network's load.
  const Tensor& take_transient(const std::string& name, const Shape& shape);
  // Whether an optional parameter is there (a random source has whatever is asked for).
  virtual bool has(const std::string& name) const = 0;
  // Claims a stored non-parameter buffer without reading it (e.g. an int64 position-id table).
  virtual void skip(const std::string& /*name*/) {}

  // In-memory dtype of the large weight matrices.
  WeightStorage storage() const { return storage_; }
  // `elements` already taken (counted as float32) are kept at `bytes_per_element` instead.
  void kept_as(std::int64_t elements, std::size_t bytes_per_element);
  // Memory a layer keeps beside its parameters (an int8 weight's scales).
  void add_bytes(std::size_t bytes) { bytes_ += bytes; }

  std::int64_t parameters() const { return params_; }
  std::size_t bytes() const { return bytes_; }

 protected:
  virtual Tensor fetch(const std::string& name, const Shape& shape) = 0;
  // take_transient()'s values; a fresh fetch() unless a source reuses memory.
  virtual Tensor fetch_transient(const std::string& name, const Shape& shape) {
    return fetch(name, shape);
  }

 private:
  WeightStorage storage_;
  std::int64_t params_ = 0;
  std::size_t bytes_ = 0;
  Tensor transient_;
};

// Parameters claimed from a checkpoint's WeightMap (names relative to its prefix). Problems
// (missing, mis-shaped) are collected by the map; WeightMap::finish reports them all.
class CheckpointParams final : public ParamSource {
 public:
  explicit CheckpointParams(WeightMap& weights, WeightStorage storage = WeightStorage::kF32)
      : ParamSource(storage), weights_(weights) {}
  bool has(const std::string& name) const override;
  void skip(const std::string& name) override;
  WeightMap& weights() { return weights_; }

 protected:
  Tensor fetch(const std::string& name, const Shape& shape) override;
  Tensor fetch_transient(const std::string& name, const Shape& shape) override;

 private:
  WeightMap& weights_;
  Tensor scratch_;  // take_transient()'s buffer, grown to the largest weight
};

// Seeded random parameters: `fill` writes the values of each requested tensor (a network's own
// init recipe, see nn/init.h), called in the order the network asks for them.
class RandomParams final : public ParamSource {
 public:
  using FillFn = std::function<void(const std::string& name, Tensor& t)>;
  explicit RandomParams(FillFn fill, WeightStorage storage = WeightStorage::kF32)
      : ParamSource(storage), fill_(std::move(fill)) {}
  bool has(const std::string&) const override { return true; }

 protected:
  Tensor fetch(const std::string& name, const Shape& shape) override;

 private:
  FillFn fill_;
};

// Records the names (with a prefix) and shapes asked for and returns empty tensors.
class ShapeRecorder final : public ParamSource {
 public:
  explicit ShapeRecorder(std::string prefix = {}) : prefix_(std::move(prefix)) {}
  bool has(const std::string&) const override { return true; }
  std::vector<std::pair<std::string, Shape>> list;

 protected:
  Tensor fetch(const std::string& name, const Shape& shape) override;

 private:
  std::string prefix_;
};

}  // namespace gen3d::models::nn
