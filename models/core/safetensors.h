#pragma once
// Safetensors reading (mmap, strict validation), writing, and a weight map that tracks which
// tensors a model claimed.
//
// File layout: 8-byte little-endian header length N, N bytes of JSON
// ({name: {dtype, shape, data_offsets}, "__metadata__": {str: str}}), then the data section.
// Every offset, shape and size is checked against the file before anything is read: a corrupt
// file raises ModelError naming the file and the tensor, never a crash.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/core/dtype.h"
#include "models/core/tensor.h"
#include "progress/progress.h"

namespace gen3d::models {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;  // as stored (may exceed rank 4; Tensor needs <= 4)
  std::uint64_t begin = 0;          // byte range inside the data section
  std::uint64_t end = 0;
  std::int64_t numel() const;
  std::string shape_str() const;  // "[2, 16, 32]"
};

class SafetensorsFile {
 public:
  // Maps the file read-only and validates it. Throws ModelError on any inconsistency. A
  // torch.save file (.bin) is read into memory instead (models/core/torch_file.h).
  static std::shared_ptr<const SafetensorsFile> open(const std::string& path);
  // Parses an in-memory image (tests, fuzzing). `label` names it in errors.
  static std::shared_ptr<const SafetensorsFile> from_bytes(std::vector<unsigned char> bytes,
                                                           std::string label);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by name
  const TensorInfo* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The stored bytes of one tensor (little-endian, possibly unaligned).
  std::span<const unsigned char> bytes(const TensorInfo& info) const;
  // Widened to float32 (F32/F16/BF16/F64), owning. Throws for integer dtypes or rank > 4.
  Tensor to_f32(const TensorInfo& info) const;
  // The same values written to `dst` (info.numel() floats).
  void read_f32(const TensorInfo& info, float* dst) const;
  Tensor to_f32(std::string_view name) const;  // throws if absent
  // Widened to float32 with another shape of the same element count (e.g. a rank-5
  // (B, N, C, H, W) tensor read as (B·N, C, H, W)).
  Tensor to_f32_as(std::string_view name, const Shape& shape) const;

 private:
  SafetensorsFile() = default;
  void parse();

  std::string path_;
  const unsigned char* base_ = nullptr;  // whole file
  std::size_t size_ = 0;
  std::size_t data_start_ = 0;
  void* map_ = nullptr;               // mmap'ed region (or null)
  std::vector<unsigned char> owned_;  // from_bytes image
  std::vector<TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Writes tensors (float32 in memory) as `dtype` (F32, F16 or BF16), names sorted, packed.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                       DType dtype = DType::kF32,
                       const std::map<std::string, std::string>& metadata = {});

// The tensors of one sub-model, with claim tracking. A model asks for each tensor it owns
// (name relative to the sub-model, expected shape); `finish()` then throws one ModelError that
// lists every missing, mis-shaped, non-float and unclaimed ("unexpected") tensor.
class WeightMap {
 public:
  // All tensors of `file` whose name starts with `prefix` (prefix stripped).
  WeightMap(std::shared_ptr<const SafetensorsFile> file, std::string prefix);

  // A sub-model of a combined checkpoint (the prefixes are named in models/shape/checkpoints.h).
  // If `file` has keys under "<submodel>.", the map holds those (prefix stripped) and other
  // sub-models' keys are not its business; otherwise it holds every key unchanged (standalone
  // checkpoint).
  static WeightMap for_submodel(std::shared_ptr<const SafetensorsFile> file,
                                std::string_view submodel);

  const std::string& prefix() const { return prefix_; }
  const SafetensorsFile& file() const { return *file_; }
  bool contains(std::string_view name) const;
  // Stored info of `name` (relative name) or null.
  const TensorInfo* info(std::string_view name) const;

  // Claims `name` and returns it widened to float32. On a missing / mis-shaped / non-float
  // tensor the problem is recorded and a zero tensor of `expected` shape is returned, so that a
  // model can collect all problems before finish() reports them.
  Tensor take(const std::string& name, const Shape& expected);
  // take() into `dst` (expected.numel() floats; zeros where take() would give zeros).
  void take_into(const std::string& name, const Shape& expected, float* dst);
  // Claims `name` and returns its stored info (for models that keep F16 storage); null after
  // recording a problem.
  const TensorInfo* take_info(const std::string& name, const Shape& expected);

  // Claims a stored non-weight buffer (e.g. an int64 position-id table) without reading it.
  void skip(const std::string& name) { claimed_.insert(name); }

  std::vector<std::string> unclaimed() const;
  const std::vector<std::string>& problems() const { return problems_; }
  // Throws ModelError listing all problems (and unclaimed tensors) of `what` (e.g. "DiT").
  void finish(std::string_view what) const;

 private:
  std::shared_ptr<const SafetensorsFile> file_;
  std::string prefix_;
  std::map<std::string, const TensorInfo*, std::less<>> entries_;  // relative name -> info
  std::set<std::string, std::less<>> claimed_;
  std::vector<std::string> problems_;
  progress::Steps progress_;  // "loading weights": tensors claimed of all, from the first claim
};

}  // namespace gen3d::models
