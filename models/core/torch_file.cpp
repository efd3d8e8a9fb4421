#include "models/core/torch_file.h"

#include <cstring>
#include <limits>
#include <map>
#include <set>

#include <minizip/unzip.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "models/core/error.h"

namespace gen3d::models {

namespace {

using i64 = std::int64_t;

// ---- zip over a byte span (minizip with an in-memory file API) ---------------------------------

struct Span {
  const unsigned char* data = nullptr;
  std::size_t size = 0;
  std::size_t pos = 0;
};

voidpf ZCALLBACK span_open(voidpf opaque, const void*, int) {
  static_cast<Span*>(opaque)->pos = 0;
  return opaque;
}
uLong ZCALLBACK span_read(voidpf, voidpf stream, void* buf, uLong size) {
  auto* s = static_cast<Span*>(stream);
  const std::size_t n = std::min<std::size_t>(size, s->size - std::min(s->pos, s->size));
  if (n) std::memcpy(buf, s->data + s->pos, n);
  s->pos += n;
  return static_cast<uLong>(n);
}
uLong ZCALLBACK span_write(voidpf, voidpf, const void*, uLong) {
  return 0;
}
ZPOS64_T ZCALLBACK span_tell(voidpf, voidpf stream) {
  return static_cast<Span*>(stream)->pos;
}
long ZCALLBACK span_seek(voidpf, voidpf stream, ZPOS64_T offset, int origin) {
  auto* s = static_cast<Span*>(stream);
  std::size_t base = 0;
  if (origin == ZLIB_FILEFUNC_SEEK_CUR) base = s->pos;
  if (origin == ZLIB_FILEFUNC_SEEK_END) base = s->size;
  if (offset > s->size || base + offset > s->size) return -1;
  s->pos = base + static_cast<std::size_t>(offset);
  return 0;
}
int ZCALLBACK span_close(voidpf, voidpf) {
  return 0;
}
int ZCALLBACK span_error(voidpf, voidpf) {
  return 0;
}

class Zip {
 public:
  Zip(const unsigned char* data, std::size_t size, std::string label)
      : span_{data, size, 0}, label_(std::move(label)) {
    zlib_filefunc64_def f{};
    f.zopen64_file = span_open;
    f.zread_file = span_read;
    f.zwrite_file = span_write;
    f.ztell64_file = span_tell;
    f.zseek64_file = span_seek;
    f.zclose_file = span_close;
    f.zerror_file = span_error;
    f.opaque = &span_;
    zip_.reset(unzOpen2_64("", &f));
    if (!zip_) throw ModelError(label_ + ": not a readable zip archive (torch.save format)");
    for (int r = unzGoToFirstFile(zip_.get()); r == UNZ_OK; r = unzGoToNextFile(zip_.get())) {
      char name[1024];
      unz_file_info64 info{};
      if (unzGetCurrentFileInfo64(zip_.get(), &info, name, sizeof(name), nullptr, 0, nullptr, 0) !=
          UNZ_OK)
        throw ModelError(label_ + ": corrupt zip directory");
      sizes_[name] = info.uncompressed_size;
      if (sizes_.size() > 1000000) throw ModelError(label_ + ": too many zip entries");
    }
  }
  Zip(const Zip&) = delete;
  Zip& operator=(const Zip&) = delete;

  const std::map<std::string, std::uint64_t>& entries() const { return sizes_; }

  // The whole entry; its size is bounded by the archive's (a stored entry cannot exceed it, a
  // deflated one is checked as it inflates).
  std::vector<unsigned char> read(const std::string& name) {
    const auto it = sizes_.find(name);
    if (it == sizes_.end()) throw ModelError(label_ + ": the archive has no " + name);
    const std::uint64_t limit = std::max<std::uint64_t>(span_.size, 1) * 1032;  // deflate bound
    if (it->second > limit) throw ModelError(label_ + ": zip entry " + name + " is too large");
    if (unzLocateFile(zip_.get(), name.c_str(), 1) != UNZ_OK ||
        unzOpenCurrentFile(zip_.get()) != UNZ_OK)
      throw ModelError(label_ + ": cannot open zip entry " + name);
    std::vector<unsigned char> out(static_cast<std::size_t>(it->second));
    std::size_t got = 0;
    while (got < out.size()) {
      const unsigned chunk =
          static_cast<unsigned>(std::min<std::size_t>(out.size() - got, 1u << 30));
      const int n = unzReadCurrentFile(zip_.get(), out.data() + got, chunk);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    const int closed = unzCloseCurrentFile(zip_.get());  // checks the CRC
    if (got != out.size() || closed != UNZ_OK)
      throw ModelError(label_ + ": zip entry " + name + " is truncated or corrupt");
    return out;
  }

 private:
  Span span_;
  std::string label_;
  struct Close {
    void operator()(void* z) const { unzClose(z); }
  };
  std::unique_ptr<void, Close> zip_;  // closed also when the constructor throws
  std::map<std::string, std::uint64_t> sizes_;
};

// ---- the restricted unpickler ------------------------------------------------------------------

struct StorageRef {
  std::string key;
  DType dtype = DType::kF32;
  i64 numel = 0;
};

struct TensorRef {
  StorageRef storage;
  i64 offset = 0;  // elements
  std::vector<i64> size, stride;
};

struct Value;
using Ptr = std::shared_ptr<Value>;

struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kTuple,
    kList,
    kDict,
    kGlobal,
    kStorage,
    kTensor
  };
  Kind kind = Kind::kNone;
  i64 i = 0;                                 // bool, int (a float's value is never needed)
  std::string s;                             // string value, or "module.name" of a global
  std::vector<Ptr> items;                    // tuple, list
  std::vector<std::pair<Ptr, Ptr>> entries;  // dict, in insertion order
  StorageRef storage;                        // storage
  TensorRef tensor;                          // tensor
};

Ptr make(Value::Kind k) {
  auto v = std::make_shared<Value>();
  v->kind = k;
  return v;
}

// The globals a state dict needs, and the storage dtypes.
const std::map<std::string, DType>& storage_types() {
  static const std::map<std::string, DType> m = {
      {"torch.FloatStorage", DType::kF32},     {"torch.HalfStorage", DType::kF16},
      {"torch.BFloat16Storage", DType::kBF16}, {"torch.DoubleStorage", DType::kF64},
      {"torch.LongStorage", DType::kI64},      {"torch.IntStorage", DType::kI32},
      {"torch.ShortStorage", DType::kI16},     {"torch.CharStorage", DType::kI8},
      {"torch.ByteStorage", DType::kU8},       {"torch.BoolStorage", DType::kBool}};
  return m;
}
const std::set<std::string>& callables() {
  static const std::set<std::string> s = {"collections.OrderedDict",
                                          "torch._utils._rebuild_tensor_v2",
                                          "torch._utils._rebuild_parameter"};
  return s;
}

class Unpickler {
 public:
  Unpickler(const std::vector<unsigned char>& data, std::string label)
      : p_(data.data()), end_(data.data() + data.size()), label_(std::move(label)) {}
  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;
  // A pickle can put a dict or list inside itself (through the memo): the values it built are
  // emptied here, so that no reference cycle outlives the unpickler.
  ~Unpickler() {
    for (const Ptr& v : mutables_) {
      v->items.clear();
      v->entries.clear();
    }
  }

  Ptr run() {
    while (true) {
      const unsigned char op = byte();
      switch (op) {
        case 0x80:
          byte();
          break;  // PROTO
        case 0x95:
          bytes(8);
          break;  // FRAME (protocol 4)
        case '.':
          return pop();  // STOP
        case '(':
          marks_.push_back(stack_.size());
          break;  // MARK
        case '0':
          pop();
          break;  // POP
        case '1':
          pop_mark();
          break;  // POP_MARK
        case '2':
          push(top());
          break;  // DUP
        case 'N':
          push(make(Value::Kind::kNone));
          break;
        case 0x88:
          push(boolean(true));
          break;  // NEWTRUE
        case 0x89:
          push(boolean(false));
          break;  // NEWFALSE
        case 'K':
          push(integer(byte()));
          break;  // BININT1
        case 'M':
          push(integer(u16()));
          break;  // BININT2
        case 'J':
          push(integer(static_cast<std::int32_t>(u32())));
          break;  // BININT
        case 0x8a:
          push(long1());
          break;  // LONG1
        case 'G':
          push(binfloat());
          break;  // BINFLOAT
        case 'X':
          push(string(u32()));
          break;  // BINUNICODE
        case 0x8c:
          push(string(byte()));
          break;  // SHORT_BINUNICODE
        case 0x8d:
          push(string(u64()));
          break;  // BINUNICODE8
        case 'T':
          push(string(u32()));
          break;  // BINSTRING
        case 'U':
          push(string(byte()));
          break;  // SHORT_BINSTRING
        case 'B':
          push(string(u32()));
          break;  // BINBYTES
        case 'C':
          push(string(byte()));
          break;  // SHORT_BINBYTES
        case ')':
          push(make(Value::Kind::kTuple));
          break;  // EMPTY_TUPLE
        case ']':
          push(mutable_value(Value::Kind::kList));
          break;  // EMPTY_LIST
        case '}':
          push(mutable_value(Value::Kind::kDict));
          break;  // EMPTY_DICT
        case 't':
          push(tuple(pop_mark()));
          break;  // TUPLE
        case 0x85:
          push(tuple_n(1));
          break;  // TUPLE1
        case 0x86:
          push(tuple_n(2));
          break;  // TUPLE2
        case 0x87:
          push(tuple_n(3));
          break;     // TUPLE3
        case 'l': {  // LIST
          auto v = mutable_value(Value::Kind::kList);
          v->items = pop_mark();
          push(v);
          break;
        }
        case 'd': {  // DICT
          auto v = mutable_value(Value::Kind::kDict);
          set_items(*v, pop_mark());
          push(v);
          break;
        }
        case 'a': {  // APPEND
          Ptr x = pop();
          list(top()).items.push_back(x);
          break;
        }
        case 'e': {  // APPENDS
          auto xs = pop_mark();
          auto& l = list(top()).items;
          l.insert(l.end(), xs.begin(), xs.end());
          break;
        }
        case 's': {  // SETITEM
          Ptr v = pop(), k = pop();
          set_items(dict(top()), {k, v});
          break;
        }
        case 'u': {  // SETITEMS
          auto kv = pop_mark();
          set_items(dict(top()), kv);
          break;
        }
        case 'c': {  // GLOBAL
          std::string module = line();
          push(global(module, line()));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          Ptr name = pop(), module = pop();
          push(global(text(module), text(name)));
          break;
        }
        case 'q':
          memo_put(byte());
          break;  // BINPUT
        case 'r':
          memo_put(u32());
          break;  // LONG_BINPUT
        case 0x94:
          memo_put(memo_.size());
          break;  // MEMOIZE
        case 'h':
          push(memo_get(byte()));
          break;  // BINGET
        case 'j':
          push(memo_get(u32()));
          break;  // LONG_BINGET
        case 'Q':
          push(persistent_id(pop()));
          break;     // BINPERSID
        case 'R': {  // REDUCE
          Ptr args = pop(), fn = pop();
          push(reduce(*fn, *args));
          break;
        }
        case 'b':
          pop();
          break;  // BUILD: a dict's attributes (_metadata) are not needed
        default:
          fail("unsupported pickle opcode 0x" + hex(op));
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { throw ModelError(label_ + ": " + msg); }
  static std::string hex(unsigned v) {
    const char* d = "0123456789abcdef";
    return std::string{d[(v >> 4) & 15], d[v & 15]};
  }

  const unsigned char* bytes(std::uint64_t n) {
    if (n > static_cast<std::uint64_t>(end_ - p_)) fail("pickle ends early");
    const unsigned char* at = p_;
    p_ += n;
    return at;
  }
  unsigned byte() { return *bytes(1); }
  std::uint64_t le(int n) {
    const unsigned char* b = bytes(static_cast<std::uint64_t>(n));
    std::uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | b[k];
    return v;
  }
  unsigned u16() { return static_cast<unsigned>(le(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(le(4)); }
  std::uint64_t u64() { return le(8); }
  std::string line() {
    const unsigned char* start = p_;
    while (p_ < end_ && *p_ != '\n') ++p_;
    if (p_ == end_) fail("pickle ends inside a GLOBAL");
    return std::string(reinterpret_cast<const char*>(start),
                       static_cast<std::size_t>(p_++ - start));
  }

  void push(Ptr v) {
    if (stack_.size() > 1000000) fail("pickle stack too deep");
    stack_.push_back(std::move(v));
  }
  Ptr pop() {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail("pickle stack underflow");
    Ptr v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Ptr top() {
    if (stack_.empty()) fail("pickle stack underflow");
    return stack_.back();
  }
  std::vector<Ptr> pop_mark() {
    if (marks_.empty()) fail("pickle MARK missing");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<Ptr> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return out;
  }

  Ptr mutable_value(Value::Kind k) {
    Ptr v = make(k);
    mutables_.push_back(v);
    return v;
  }
  static Ptr boolean(bool b) {
    auto v = make(Value::Kind::kBool);
    v->i = b;
    return v;
  }
  static Ptr integer(i64 x) {
    auto v = make(Value::Kind::kInt);
    v->i = x;
    return v;
  }
  Ptr long1() {
    const unsigned n = byte();
    if (n > 8) fail("integer wider than 64 bits");
    std::uint64_t v = n ? le(static_cast<int>(n)) : 0;
    if (n && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~std::uint64_t{0} << (8 * n);  // sign
    return integer(static_cast<i64>(v));
  }
  Ptr binfloat() {
    bytes(8);  // a big-endian double; no float is needed to rebuild a state dict
    return make(Value::Kind::kFloat);
  }
  Ptr string(std::uint64_t n) {
    const unsigned char* b = bytes(n);
    auto v = make(Value::Kind::kString);
    v->s.assign(reinterpret_cast<const char*>(b), static_cast<std::size_t>(n));
    return v;
  }
  static Ptr tuple(std::vector<Ptr> items) {
    auto v = make(Value::Kind::kTuple);
    v->items = std::move(items);
    return v;
  }
  Ptr tuple_n(int n) {
    std::vector<Ptr> items(static_cast<std::size_t>(n));
    for (int k = n - 1; k >= 0; --k) items[static_cast<std::size_t>(k)] = pop();
    return tuple(std::move(items));
  }
  Value& list(const Ptr& v) {
    if (v->kind != Value::Kind::kList) fail("APPEND to a non-list");
    return *v;
  }
  Value& dict(const Ptr& v) {
    if (v->kind != Value::Kind::kDict) fail("SETITEM on a non-dict");
    return *v;
  }
  void set_items(Value& d, const std::vector<Ptr>& kv) {
    if (kv.size() % 2) fail("odd number of dict items");
    for (std::size_t k = 0; k < kv.size(); k += 2) d.entries.emplace_back(kv[k], kv[k + 1]);
  }
  std::string text(const Ptr& v) const {
    if (v->kind != Value::Kind::kString) fail("expected a string in the pickle");
    return v->s;
  }

  // Globals are resolved by name against the allow-list before anything could use them.
  Ptr global(const std::string& module, const std::string& name) {
    const std::string full = module + "." + name;
    if (!callables().count(full) && !storage_types().count(full))
      fail("refuses to import " + full +
           ": only state dicts (dicts of tensors, or dicts of those) are read; nothing is "
           "executed");
    auto v = make(Value::Kind::kGlobal);
    v->s = full;
    return v;
  }

  void memo_put(std::uint64_t index) {
    if (index > 10000000) fail("memo index out of range");
    memo_[index] = top();
  }
  Ptr memo_get(std::uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo entry " + std::to_string(index) + " is missing");
    return it->second;
  }

  // ('storage', torch.<Type>Storage, key, location, numel)
  Ptr persistent_id(const Ptr& pid) {
    if (pid->kind != Value::Kind::kTuple || pid->items.size() < 5 ||
        pid->items[0]->kind != Value::Kind::kString || pid->items[0]->s != "storage" ||
        pid->items[1]->kind != Value::Kind::kGlobal || pid->items[4]->kind != Value::Kind::kInt)
      fail("unsupported persistent id (not a typed storage)");
    const auto dt = storage_types().find(pid->items[1]->s);
    if (dt == storage_types().end()) fail(pid->items[1]->s + " is not a storage type");
    auto v = make(Value::Kind::kStorage);
    v->storage.key = text(pid->items[2]);
    v->storage.dtype = dt->second;
    v->storage.numel = pid->items[4]->i;
    if (v->storage.numel < 0) fail("storage " + v->storage.key + " has a negative size");
    return v;
  }

  std::vector<i64> ints(const Ptr& v, const char* what) const {
    if (v->kind != Value::Kind::kTuple) fail(std::string(what) + " is not a tuple");
    std::vector<i64> out;
    for (const Ptr& e : v->items) {
      if (e->kind != Value::Kind::kInt) fail(std::string(what) + " holds a non-integer");
      out.push_back(e->i);
    }
    return out;
  }

  Ptr reduce(const Value& fn, const Value& args) {
    if (fn.kind != Value::Kind::kGlobal || args.kind != Value::Kind::kTuple)
      fail("REDUCE of something other than an allowed global");
    if (fn.s == "collections.OrderedDict") return mutable_value(Value::Kind::kDict);
    if (fn.s == "torch._utils._rebuild_parameter") {
      if (args.items.empty() || args.items[0]->kind != Value::Kind::kTensor)
        fail("_rebuild_parameter without a tensor");
      return args.items[0];
    }
    if (fn.s == "torch._utils._rebuild_tensor_v2") {
      if (args.items.size() < 4 || args.items[0]->kind != Value::Kind::kStorage ||
          args.items[1]->kind != Value::Kind::kInt)
        fail("malformed _rebuild_tensor_v2 call");
      TensorRef t;
      t.storage = args.items[0]->storage;
      t.offset = args.items[1]->i;
      t.size = ints(args.items[2], "tensor size");
      t.stride = ints(args.items[3], "tensor stride");
      if (t.size.size() != t.stride.size()) fail("tensor size and stride differ in rank");
      auto v = make(Value::Kind::kTensor);
      v->tensor = std::move(t);
      return v;
    }
    fail("cannot call " + fn.s);  // a storage type
  }

  const unsigned char* p_;
  const unsigned char* end_;
  std::string label_;
  std::vector<Ptr> stack_;
  std::vector<std::size_t> marks_;
  std::map<std::uint64_t, Ptr> memo_;
  std::vector<Ptr> mutables_;  // every dict and list built
};

// ---- assembling the safetensors image
// ------------------------------------------------------------

struct Planned {
  std::string name;
  TensorRef t;
  std::uint64_t begin = 0, end = 0;  // in the image's data section
};

// Dicts nest this deep at most: a state dict (1) inside a dict of sub-models (2), with room for
// one or two wrappers more (e.g. {'state_dict': {...}}).
constexpr int kMaxNesting = 4;
constexpr std::size_t kMaxTensors = 1000000;
// Names are module paths; a pickle can reuse one long key through its memo at every level.
constexpr std::size_t kMaxNameBytes = 4096, kMaxAllNameBytes = std::size_t{256} << 20;

const char* kind_name(Value::Kind k) {
  switch (k) {
    case Value::Kind::kTuple:
      return "a tuple";
    case Value::Kind::kList:
      return "a list";
    case Value::Kind::kGlobal:
      return "a class or function";
    case Value::Kind::kStorage:
      return "a bare storage";
    default:
      return "not a tensor";
  }
}

// The tensors of a state dict, or of a dict of state dicts, by their flattened names
// ("model." + "blocks.0...."), in insertion order. Scalars beside them (training bookkeeping such
// as an epoch, a step, a learning rate, a name, a flag, None; torch.load(weights_only=True), which
// the official loaders use, accepts them too) are skipped, each named in a debug note; anything
// else is refused.
void flatten(const Value& dict, const std::string& path, int depth,
             std::vector<std::pair<std::string, const TensorRef*>>& out, std::size_t& name_bytes,
             const std::string& label) {
  auto fail = [&](const std::string& msg) { throw ModelError(label + ": " + msg); };
  if (depth > kMaxNesting)
    fail("the dict '" + path.substr(0, path.size() - 1) + "' is nested deeper than " +
         std::to_string(kMaxNesting) + " levels (not a state dict or a dict of state dicts)");
  for (const auto& [k, v] : dict.entries) {
    if (k->kind != Value::Kind::kString)
      fail("a key of " +
           (path.empty() ? std::string("the state dict")
                         : "'" + path.substr(0, path.size() - 1) + "'") +
           " is not a string");
    if (path.size() + k->s.size() > kMaxNameBytes)
      fail("a tensor name is longer than " + std::to_string(kMaxNameBytes) + " bytes");
    const std::string name = path + k->s;
    switch (v->kind) {
      case Value::Kind::kTensor:
        if (out.size() >= kMaxTensors) fail("more than a million tensors");
        name_bytes += name.size();
        if (name_bytes > kMaxAllNameBytes) fail("the tensor names take more than 256 MiB");
        out.emplace_back(name, &v->tensor);
        break;
      case Value::Kind::kDict:
        flatten(*v, name + ".", depth + 1, out, name_bytes, label);
        break;
      case Value::Kind::kNone:
      case Value::Kind::kBool:
      case Value::Kind::kInt:
      case Value::Kind::kFloat:
      case Value::Kind::kString:
        spdlog::debug("{}: entry '{}' is not a tensor (skipped)", label, name);
        break;
      default:
        fail("entry '" + name + "' is " + kind_name(v->kind) +
             ", not a tensor or a dict of tensors");
    }
  }
}

std::shared_ptr<const SafetensorsFile> assemble(Zip& zip, const std::string& prefix,
                                                const Value& dict, const std::string& label) {
  auto fail = [&](const std::string& msg) -> void { throw ModelError(label + ": " + msg); };
  if (dict.kind != Value::Kind::kDict)
    fail("the pickle does not hold a state dict (an OrderedDict of tensors)");
  std::vector<std::pair<std::string, const TensorRef*>> leaves;
  std::size_t name_bytes = 0;
  flatten(dict, "", 1, leaves, name_bytes, label);
  std::vector<Planned> plan;
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const auto& [name, ref] : leaves) {
    if (!names.insert(name).second) fail("tensor '" + name + "' appears twice");
    const TensorRef& t = *ref;
    // Every element the view reaches must lie inside its storage.
    i64 numel = 1, last = t.offset;
    for (std::size_t d = 0; d < t.size.size(); ++d) {
      if (t.size[d] < 0 || t.stride[d] < 0) fail("tensor '" + name + "' has a negative size");
      if (t.size[d] > (i64{1} << 40) / std::max<i64>(numel, 1))
        fail("tensor '" + name + "' is too large");
      numel *= t.size[d];
      if (t.size[d] > 1 && t.stride[d] > (std::numeric_limits<i64>::max() - last) / (t.size[d] - 1))
        fail("tensor '" + name + "' reaches past its storage " + t.storage.key);
      if (t.size[d] > 0) last += (t.size[d] - 1) * t.stride[d];
    }
    if (t.offset < 0 || (numel > 0 && last >= t.storage.numel))
      fail("tensor '" + name + "' reaches past its storage " + t.storage.key);
    // The storage must be in the archive at its announced size before anything is allocated.
    const std::size_t es = dtype_size(t.storage.dtype);
    const auto entry = zip.entries().find(prefix + "data/" + t.storage.key);
    if (entry == zip.entries().end()) fail("the archive has no storage " + t.storage.key);
    if (static_cast<std::uint64_t>(t.storage.numel) > entry->second / es)
      fail("storage " + t.storage.key + " is smaller than its tensors say");
    const std::uint64_t bytes = static_cast<std::uint64_t>(numel) * es;
    plan.push_back({name, t, offset, offset + bytes});
    offset += bytes;
  }
  // Views may repeat their storage (stride 0), but not without bound.
  std::uint64_t stored = 0;
  for (const auto& [name, size] : zip.entries()) stored += size;
  if (offset > 4 * stored + (std::uint64_t{1} << 20))
    fail("the tensors' views expand the stored data more than fourfold");
  nlohmann::json header = nlohmann::json::object();
  for (const Planned& p : plan)
    header[p.name] = {{"dtype", std::string(dtype_name(p.t.storage.dtype))},
                      {"shape", p.t.size},
                      {"data_offsets", {p.begin, p.end}}};
  header["__metadata__"] = {{"format", "pt"}, {"source", "torch.save"}};
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception&) {  // names are Python str: valid UTF-8 when real
    fail("a tensor name is not valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<unsigned char> image(8 + text.size() + offset);
  for (int k = 0; k < 8; ++k)
    image[static_cast<std::size_t>(k)] = static_cast<unsigned char>(text.size() >> (8 * k));
  std::memcpy(image.data() + 8, text.data(), text.size());
  unsigned char* data = image.data() + 8 + text.size();

  // One storage at a time: every tensor viewing it is copied out, then it is released.
  std::map<std::string, std::vector<const Planned*>> by_storage;
  for (const Planned& p : plan) by_storage[p.t.storage.key].push_back(&p);
  for (const auto& [key, users] : by_storage) {
    const std::vector<unsigned char> storage = zip.read(prefix + "data/" + key);
    const std::size_t es = dtype_size(users.front()->t.storage.dtype);
    for (const Planned* p : users) {
      const TensorRef& t = p->t;
      if (dtype_size(t.storage.dtype) != es ||
          static_cast<std::uint64_t>(t.storage.numel) > storage.size() / es)
        fail("storage " + key + " is smaller than its tensors say");
      const std::size_t rank = t.size.size();
      const i64 count = static_cast<i64>((p->end - p->begin) / es);
      std::vector<i64> index(rank, 0);
      for (i64 n = 0; n < count; ++n) {
        i64 src = t.offset;
        for (std::size_t d = 0; d < rank; ++d) src += index[d] * t.stride[d];
        std::memcpy(data + p->begin + static_cast<std::uint64_t>(n) * es,
                    storage.data() + static_cast<std::size_t>(src) * es, es);
        for (std::size_t d = rank; d-- > 0;) {  // row-major increment
          if (++index[d] < t.size[d]) break;
          index[d] = 0;
        }
      }
    }
  }
  return SafetensorsFile::from_bytes(std::move(image), label);
}

}  // namespace

namespace {

bool is_zip(const unsigned char* bytes, std::size_t size) {
  return size >= 9 && bytes[0] == 'P' && bytes[1] == 'K' && bytes[2] == 3 && bytes[3] == 4 &&
         bytes[8] != '{';
}

bool is_legacy_pickle(const unsigned char* bytes, std::size_t size) {
  return size >= 2 && bytes[0] == 0x80 && bytes[1] <= 5 && (size < 9 || bytes[8] != '{');
}

}  // namespace

bool looks_like_torch_save(const unsigned char* bytes, std::size_t size) {
  return is_zip(bytes, size) || is_legacy_pickle(bytes, size);
}

std::shared_ptr<const SafetensorsFile> read_torch_bytes(const unsigned char* bytes,
                                                        std::size_t size,
                                                        const std::string& label) {
  if (is_legacy_pickle(bytes, size))
    throw ModelError(label +
                     ": a PyTorch checkpoint in the legacy (pre-1.6) format, which is not read; "
                     "re-save it once with torch.save(torch.load(f), f) in PyTorch >= 1.6");
  if (!is_zip(bytes, size))
    throw ModelError(label + ": neither a safetensors file nor a torch.save zip archive");
  Zip zip(bytes, size, label);
  std::string pickle;
  for (const auto& [name, n] : zip.entries())
    if (name.size() >= 8 && name.compare(name.size() - 8, 8, "data.pkl") == 0) {
      if (!pickle.empty()) throw ModelError(label + ": the archive holds two data.pkl");
      pickle = name;
    }
  if (pickle.empty()) throw ModelError(label + ": the archive has no data.pkl (not torch.save)");
  const std::string prefix = pickle.substr(0, pickle.size() - 8);
  const std::vector<unsigned char> pkl = zip.read(pickle);
  Unpickler unpickler(pkl, label);  // keeps the values alive until the image is assembled
  const Ptr dict = unpickler.run();
  auto file = assemble(zip, prefix, *dict, label);
  spdlog::debug("torch.save: {} ({} tensors)", label, file->tensors().size());
  return file;
}

}  // namespace gen3d::models
