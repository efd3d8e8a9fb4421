#include "support/torch_save.h"

#include <minizip/zip.h>

#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace gen3d::test {
namespace {

// Protocol 2 pickle opcodes, as pickletools names them.
class Pickle {
 public:
  void op(char c) { out_.push_back(c); }
  void global(const std::string& module, const std::string& name) {
    op('c');
    out_ += module + "\n" + name + "\n";
  }
  void str(const std::string& s) {
    op('X');
    u32(static_cast<std::uint32_t>(s.size()));
    out_ += s;
  }
  void integer(std::int64_t v) {
    if (v < 0 || v > 0x7fffffff) throw std::runtime_error("torch_save: integer out of range");
    op('J');
    u32(static_cast<std::uint32_t>(v));
  }
  void tuple(const std::vector<std::int64_t>& v) {
    op('(');
    for (std::int64_t x : v) integer(x);
    op('t');
  }
  // torch._utils._rebuild_tensor_v2(storage, 0, size, stride, False, OrderedDict())
  void tensor(const std::string& key, const char* storage_type, const models::Tensor& t) {
    global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    op('(');  // persistent id ('storage', type, key, 'cpu', numel)
    str("storage");
    global("torch", storage_type);
    str(key);
    str("cpu");
    integer(t.numel());
    op('t');
    op('Q');  // BINPERSID
    integer(0);
    std::vector<std::int64_t> size(t.shape().dims().begin(), t.shape().dims().end());
    std::vector<std::int64_t> stride(size.size(), 1);
    for (std::size_t i = size.size(); i-- > 1;) stride[i - 1] = stride[i] * size[i];
    tuple(size);
    tuple(stride);
    op('\x89');  // NEWFALSE
    ordered_dict();
    op('t');
    op('R');
  }
  void ordered_dict() {
    global("collections", "OrderedDict");
    op(')');
    op('R');
  }
  std::string finish() {
    op('.');
    return out_;
  }

 private:
  void u32(std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_ = std::string("\x80\x02", 2);
};

void add_entry(zipFile zf, const std::string& name, const std::string& bytes) {
  zip_fileinfo info{};
  if (zipOpenNewFileInZip64(zf, name.c_str(), &info, nullptr, 0, nullptr, 0, nullptr, 0, 0, 1) !=
          ZIP_OK ||
      zipWriteInFileInZip(zf, bytes.data(), static_cast<unsigned>(bytes.size())) != ZIP_OK ||
      zipCloseFileInZip(zf) != ZIP_OK)
    throw std::runtime_error("torch_save: cannot write zip entry " + name);
}

}  // namespace

void write_torch_save(const std::string& path,
                      const std::vector<std::pair<std::string, NamedTensors>>& groups,
                      models::DType dtype) {
  if (dtype != models::DType::kF32 && dtype != models::DType::kF16)
    throw std::runtime_error("torch_save: F32 or F16 only");
  const char* storage = dtype == models::DType::kF16 ? "HalfStorage" : "FloatStorage";
  Pickle p;
  std::vector<std::pair<std::string, std::string>> storages;  // key -> bytes
  const bool nested = !(groups.size() == 1 && groups[0].first.empty());
  if (nested) {  // {group: OrderedDict, ...}
    p.op('}');
    p.op('(');
  }
  for (const auto& [group, tensors] : groups) {
    if (nested) p.str(group);
    p.ordered_dict();
    p.op('(');
    for (const auto& [name, t] : tensors) {
      const std::string key = std::to_string(storages.size());
      p.str(name);
      p.tensor(key, storage, t);
      std::string bytes;
      if (dtype == models::DType::kF16) {
        bytes.resize(static_cast<std::size_t>(t.numel()) * 2);
        for (std::int64_t i = 0; i < t.numel(); ++i) {
          const std::uint16_t h = models::float_to_half(t.data()[i]);
          std::memcpy(bytes.data() + 2 * i, &h, 2);
        }
      } else {
        bytes.assign(reinterpret_cast<const char*>(t.data()),
                     static_cast<std::size_t>(t.numel()) * 4);
      }
      storages.emplace_back(key, std::move(bytes));
    }
    p.op('u');  // SETITEMS into the OrderedDict
  }
  if (nested) p.op('u');
  const std::string pickle = p.finish();

  zipFile zf = zipOpen64(path.c_str(), APPEND_STATUS_CREATE);
  if (!zf) throw std::runtime_error("torch_save: cannot create " + path);
  try {
    add_entry(zf, "archive/data.pkl", pickle);
    for (const auto& [key, bytes] : storages) add_entry(zf, "archive/data/" + key, bytes);
    add_entry(zf, "archive/version", "3\n");
  } catch (...) {
    zipClose(zf, nullptr);
    throw;
  }
  if (zipClose(zf, nullptr) != ZIP_OK) throw std::runtime_error("torch_save: cannot close " + path);
}

}  // namespace gen3d::test
