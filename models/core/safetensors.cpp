#include "models/core/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "models/core/error.h"
#include "models/core/torch_file.h"

namespace gen3d::models {

namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;  // the reference library's limit

std::string shape_to_str(std::span<const std::int64_t> dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[i]);
  }
  return s + "]";
}

std::uint64_t read_u64_le(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string TensorInfo::shape_str() const {
  return shape_to_str(shape);
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ModelError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ModelError(path + ": not a regular file");
  }
  f->size_ = static_cast<std::size_t>(st.st_size);
  if (f->size_ > 0) {
    void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      throw ModelError(path + ": mmap failed: " + std::strerror(errno));
    }
    f->map_ = m;
    f->base_ = static_cast<const unsigned char*>(m);
  }
  ::close(fd);
  // The official diffusers weights are also published as torch.save files (.bin).
  if (looks_like_torch_save(f->base_, f->size_)) return read_torch_bytes(f->base_, f->size_, path);
  f->parse();
  spdlog::debug("safetensors: {} ({} tensors, {} bytes)", path, f->tensors_.size(), f->size_);
  return f;
}

std::shared_ptr<const SafetensorsFile> SafetensorsFile::from_bytes(std::vector<unsigned char> bytes,
                                                                   std::string label) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = std::move(label);
  f->owned_ = std::move(bytes);
  f->base_ = f->owned_.data();
  f->size_ = f->owned_.size();
  f->parse();
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) ::munmap(map_, size_);
}

void SafetensorsFile::parse() {
  auto fail = [&](const std::string& msg) -> void { throw ModelError(path_ + ": " + msg); };
  if (size_ < 8)
    fail("file too short for a safetensors header (" + std::to_string(size_) + " bytes)");
  const std::uint64_t n = read_u64_le(base_);
  if (n > kMaxHeaderBytes) fail("header length " + std::to_string(n) + " exceeds 100 MiB");
  if (n > size_ - 8)
    fail("header length " + std::to_string(n) + " runs past the end of the file (" +
         std::to_string(size_) + " bytes)");
  data_start_ = 8 + static_cast<std::size_t>(n);
  const std::uint64_t data_size = size_ - data_start_;

  const auto* hb = reinterpret_cast<const char*>(base_ + 8);
  nlohmann::json header = nlohmann::json::parse(hb, hb + n, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded()) fail("header is not valid JSON");
  if (!header.is_object()) fail("header is not a JSON object");

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) fail("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) fail("__metadata__." + m.key() + " is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + key + "': ";
    if (!v.is_object()) fail(where + "entry is not an object");
    for (auto f = v.begin(); f != v.end(); ++f) {
      if (f.key() != "dtype" && f.key() != "shape" && f.key() != "data_offsets")
        fail(where + "unknown field '" + f.key() + "'");
    }
    if (!v.contains("dtype") || !v["dtype"].is_string()) fail(where + "missing string 'dtype'");
    if (!v.contains("shape") || !v["shape"].is_array()) fail(where + "missing array 'shape'");
    if (!v.contains("data_offsets") || !v["data_offsets"].is_array() ||
        v["data_offsets"].size() != 2)
      fail(where + "'data_offsets' must be an array of two integers");

    TensorInfo info;
    info.name = key;
    const std::string dt = v["dtype"].get<std::string>();
    if (!parse_dtype(dt, &info.dtype)) fail(where + "unsupported dtype '" + dt + "'");
    // numel * element size must not overflow and must match the byte range.
    std::uint64_t numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) fail(where + "shape entries must be non-negative integers");
      const std::uint64_t dim = d.get<std::uint64_t>();
      if (dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        fail(where + "dimension too large");
      if (dim != 0 && numel > std::numeric_limits<std::uint64_t>::max() / 16 / dim)
        fail(where + "element count overflows");
      numel *= dim;
      info.shape.push_back(static_cast<std::int64_t>(dim));
    }
    for (const auto& o : v["data_offsets"])
      if (!o.is_number_unsigned()) fail(where + "data_offsets must be non-negative integers");
    info.begin = v["data_offsets"][0].get<std::uint64_t>();
    info.end = v["data_offsets"][1].get<std::uint64_t>();
    if (info.begin > info.end)
      fail(where + "data_offsets [" + std::to_string(info.begin) + ", " + std::to_string(info.end) +
           "] are reversed");
    if (info.end > data_size)
      fail(where + "data_offsets end " + std::to_string(info.end) + " is past the data section (" +
           std::to_string(data_size) + " bytes)");
    const std::uint64_t expect = numel * dtype_size(info.dtype);
    if (info.end - info.begin != expect)
      fail(where + "byte range of " + std::to_string(info.end - info.begin) + " does not match " +
           std::string(dtype_name(info.dtype)) + " " + info.shape_str() + " (" +
           std::to_string(expect) + " bytes)");
    tensors_.push_back(std::move(info));
  }

  // Like the reference implementation: tensors tile the data section without gaps or overlap.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& t : tensors_) by_offset.push_back(&t);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const TensorInfo* a, const TensorInfo* b) {
                     return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
                   });
  std::uint64_t expected = 0;
  for (const TensorInfo* t : by_offset) {
    if (t->begin != expected)
      fail("tensor '" + t->name + "' starts at byte " + std::to_string(t->begin) +
           " of the data section, expected " + std::to_string(expected) +
           (t->begin < expected ? " (overlaps the previous tensor)" : " (gap)"));
    expected = t->end;
  }
  if (expected != data_size)
    fail("data section has " + std::to_string(data_size) + " bytes but tensors cover " +
         std::to_string(expected));
  std::sort(tensors_.begin(), tensors_.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  return (it != tensors_.end() && it->name == name) ? &*it : nullptr;
}

std::span<const unsigned char> SafetensorsFile::bytes(const TensorInfo& info) const {
  return {base_ + data_start_ + info.begin, static_cast<std::size_t>(info.end - info.begin)};
}

Tensor SafetensorsFile::to_f32(const TensorInfo& info) const {
  if (!is_float_dtype(info.dtype))
    throw ModelError(path_ + ": tensor '" + info.name + "' has dtype " +
                     std::string(dtype_name(info.dtype)) + ", expected a float dtype");
  if (info.shape.size() > static_cast<std::size_t>(Shape::kMaxRank))
    throw ModelError(path_ + ": tensor '" + info.name + "' has rank " +
                     std::to_string(info.shape.size()) + " > 4");
  Tensor t(Shape::from(info.shape));
  widen_to_f32(info.dtype, bytes(info).data(), static_cast<std::size_t>(info.numel()), t.data());
  return t;
}

void SafetensorsFile::read_f32(const TensorInfo& info, float* dst) const {
  if (!is_float_dtype(info.dtype))
    throw ModelError(path_ + ": tensor '" + info.name + "' has dtype " +
                     std::string(dtype_name(info.dtype)) + ", expected a float dtype");
  widen_to_f32(info.dtype, bytes(info).data(), static_cast<std::size_t>(info.numel()), dst);
}

Tensor SafetensorsFile::to_f32(std::string_view name) const {
  const TensorInfo* info = find(name);
  if (!info) throw ModelError(path_ + ": no tensor named '" + std::string(name) + "'");
  return to_f32(*info);
}

Tensor SafetensorsFile::to_f32_as(std::string_view name, const Shape& shape) const {
  const TensorInfo* info = find(name);
  if (!info) throw ModelError(path_ + ": no tensor named '" + std::string(name) + "'");
  if (!is_float_dtype(info->dtype))
    throw ModelError(path_ + ": tensor '" + info->name + "' has dtype " +
                     std::string(dtype_name(info->dtype)) + ", expected a float dtype");
  if (info->numel() != shape.numel())
    throw ModelError(path_ + ": tensor '" + info->name + "' " + info->shape_str() +
                     " cannot be read as " + shape.str());
  Tensor t(shape);
  widen_to_f32(info->dtype, bytes(*info).data(), static_cast<std::size_t>(info->numel()), t.data());
  return t;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                       DType dtype, const std::map<std::string, std::string>& metadata) {
  if (dtype != DType::kF32 && dtype != DType::kF16 && dtype != DType::kBF16)
    throw ModelError(path + ": write_safetensors supports F32, F16 and BF16 only");
  auto sorted = tensors;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::size_t esize = dtype_size(dtype);
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : sorted) {
    const std::uint64_t nbytes = static_cast<std::uint64_t>(t->numel()) * esize;
    std::vector<std::int64_t> dims(t->shape().dims().begin(), t->shape().dims().end());
    header[name] = {{"dtype", std::string(dtype_name(dtype))},
                    {"shape", dims},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string h = header.dump();
  while (h.size() % 8) h.push_back(' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw ModelError(path + ": cannot open for writing");
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((h.size() >> (8 * i)) & 0xff);
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& [name, t] : sorted) {
    const std::size_t n = static_cast<std::size_t>(t->numel());
    if (dtype == DType::kF32) {
      out.write(reinterpret_cast<const char*>(t->data()), static_cast<std::streamsize>(n * 4));
    } else {
      std::vector<std::uint16_t> buf(n);
      for (std::size_t i = 0; i < n; ++i)
        buf[i] = dtype == DType::kF16 ? float_to_half(t->data()[i]) : float_to_bf16(t->data()[i]);
      out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(n * 2));
    }
  }
  if (!out) throw ModelError(path + ": write failed");
}

WeightMap::WeightMap(std::shared_ptr<const SafetensorsFile> file, std::string prefix)
    : file_(std::move(file)), prefix_(std::move(prefix)) {
  for (const auto& t : file_->tensors()) {
    if (t.name.size() >= prefix_.size() && t.name.compare(0, prefix_.size(), prefix_) == 0)
      entries_.emplace(t.name.substr(prefix_.size()), &t);
  }
}

WeightMap WeightMap::for_submodel(std::shared_ptr<const SafetensorsFile> file,
                                  std::string_view submodel) {
  const std::string prefix = std::string(submodel) + ".";
  for (const auto& t : file->tensors())
    if (t.name.compare(0, prefix.size(), prefix) == 0) return WeightMap(std::move(file), prefix);
  return WeightMap(std::move(file), "");
}

bool WeightMap::contains(std::string_view name) const {
  return entries_.count(name) != 0;
}

const TensorInfo* WeightMap::info(std::string_view name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : it->second;
}

const TensorInfo* WeightMap::take_info(const std::string& name, const Shape& expected) {
  auto it = entries_.find(name);
  if (it == entries_.end()) {
    problems_.push_back("missing " + prefix_ + name + " (expected shape " + expected.str() + ")");
    return nullptr;
  }
  claimed_.insert(name);
  // Reading a tensor is what pages its bytes in from the mapped file: progress per tensor, at
  // most ten reports a second.
  if (progress_.total() == 0)
    progress_ = progress::Steps("loading weights", static_cast<std::int64_t>(entries_.size()), 0.1);
  progress_.done(static_cast<std::int64_t>(claimed_.size()));
  const TensorInfo* info = it->second;
  if (info->shape != std::vector<std::int64_t>(expected.dims().begin(), expected.dims().end())) {
    problems_.push_back("mis-shaped " + info->name + ": expected " + expected.str() + ", got " +
                        info->shape_str());
    return nullptr;
  }
  if (!is_float_dtype(info->dtype)) {
    problems_.push_back("wrong dtype " + info->name + ": " + std::string(dtype_name(info->dtype)) +
                        " (expected F32, F16 or BF16)");
    return nullptr;
  }
  return info;
}

Tensor WeightMap::take(const std::string& name, const Shape& expected) {
  const TensorInfo* info = take_info(name, expected);
  if (!info) return Tensor(expected);
  return file_->to_f32(*info);
}

void WeightMap::take_into(const std::string& name, const Shape& expected, float* dst) {
  const TensorInfo* info = take_info(name, expected);
  if (!info) {
    std::fill_n(dst, expected.numel(), 0.0f);
    return;
  }
  file_->read_f32(*info, dst);
}

std::vector<std::string> WeightMap::unclaimed() const {
  std::vector<std::string> out;
  for (const auto& [name, info] : entries_)
    if (!claimed_.count(name)) out.push_back(info->name);
  return out;
}

void WeightMap::finish(std::string_view what) const {
  std::vector<std::string> all = problems_;
  for (const auto& [name, info] : entries_) {
    if (!claimed_.count(name))
      all.push_back("unexpected " + info->name + " " + std::string(dtype_name(info->dtype)) + " " +
                    info->shape_str());
  }
  if (all.empty()) return;
  std::string msg = file_->path() + ": " + std::string(what) +
                    " weights do not match the config (" + std::to_string(all.size()) + " problem" +
                    (all.size() > 1 ? "s" : "") + "):";
  for (const auto& p : all) msg += "\n  " + p;
  throw ModelError(msg);
}

}  // namespace gen3d::models
