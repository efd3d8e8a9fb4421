#include "pipeline/stage_cache.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <xxhash.h>

#include "pipeline/error.h"
#include "pipeline/graph.h"

namespace gen3d::pipeline {

namespace fs = std::filesystem;

namespace {

// The GNU build id of the executable's notes (every stage is linked into it); empty without one.
int read_build_id(dl_phdr_info* info, size_t, void* out) {
  for (int k = 0; k < info->dlpi_phnum; ++k) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[k];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof(ElfW(Nhdr));
      const char* desc = name + ((note->n_namesz + 3) & ~3u);
      if (desc + note->n_descsz > end) break;
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0) {
        static_cast<std::string*>(out)->assign(desc, note->n_descsz);
        return 1;
      }
      p = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  return 1;  // the first object is the executable; the libraries it loads are not ours
}

// What computes the values: a rebuilt or upgraded gen3d gets new keys, so it never trusts what an
// older build stored. The build id, else the executable's path, size and modification time.
const std::string& code_identity() {
  static const std::string id = [] {
    std::string out;
    dl_iterate_phdr(read_build_id, &out);
    if (!out.empty()) return out;
    std::error_code ec;
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    struct stat st {};
    if (!ec && ::stat(exe.c_str(), &st) == 0)
      out = fmt::format("{}:{}:{}.{}", exe.string(), st.st_size, st.st_mtim.tv_sec,
                        st.st_mtim.tv_nsec);
    return out;
  }();
  return id;
}

constexpr char kMagic[8] = {'G', '3', 'D', 'C', 'A', 'C', 'H', 'E'};
constexpr uint32_t kFormatVersion = 2;                       // 2: the node's counters and gauges
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 16 + 8 + 8 + 8;  // see write_entry
constexpr const char* kEntrySuffix = ".g3c";

struct FileStat {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileStat&) const = default;
};

std::optional<FileStat> stat_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  FileStat s;
  s.dev = static_cast<uint64_t>(st.st_dev);
  s.ino = static_cast<uint64_t>(st.st_ino);
  s.size = static_cast<uint64_t>(st.st_size);
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.ctime_ns = static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  return s;
}

std::string stat_text(const FileStat& s) {
  return fmt::format("{} {} {} {} {}", s.dev, s.ino, s.size, s.mtime_ns, s.ctime_ns);
}

CacheKey hash128(std::string_view bytes) {
  const XXH128_hash_t h = XXH3_128bits(bytes.data(), bytes.size());
  return CacheKey{h.high64, h.low64};
}

// Reads a whole file; nothing when it does not exist or cannot be read.
std::optional<std::string> read_whole(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return std::nullopt;
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);  // a file shrinking under us reads as truncated
  return out;
}

// Writes `parts` to a temporary sibling of `path` and renames it into place.
void write_atomically(const std::string& path, const std::vector<std::string_view>& parts) {
  static std::atomic<uint64_t> counter{0};
  const std::string temp = fmt::format("{}.tmp{}_{}", path, ::getpid(), counter++);
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(fmt::format("cannot write {}: {}", temp, strerror(errno)));
  bool ok = true;
  for (std::string_view part : parts) {
    const char* p = part.data();
    size_t left = part.size();
    while (ok && left > 0) {
      const ssize_t n = ::write(fd, p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ok = false;
        break;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }
  const int err = errno;
  if (::close(fd) != 0) ok = false;
  if (!ok || ::rename(temp.c_str(), path.c_str()) != 0) {
    ::unlink(temp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, strerror(ok ? errno : err)));
  }
}

// An exclusive flock on DIR/lock for as long as it lives (eviction, clearing).
class DirLock {
 public:
  explicit DirLock(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0)
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

// A whole file mapped read-only (entries are decoded straight from the page cache).
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct stat st {};
    if (::fstat(fd, &st) == 0) {
      size_ = static_cast<size_t>(st.st_size);
      if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
          data_ = static_cast<const char*>(p);
          ::madvise(p, size_, MADV_SEQUENTIAL);
        }
      }
      open_ = size_ == 0 || data_;
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<char*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  bool open() const { return open_; }
  std::string_view bytes() const { return {data_ ? data_ : "", data_ ? size_ : 0}; }

 private:
  const char* data_ = nullptr;
  size_t size_ = 0;
  bool open_ = false;
};

struct EntryFile {
  std::string path;
  uint64_t bytes = 0;
  int64_t used_ns = 0;
};

std::vector<EntryFile> list_entries(const std::string& dir) {
  std::vector<EntryFile> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string p = it->path().string();
    if (!p.ends_with(kEntrySuffix)) continue;
    if (const auto s = stat_file(p)) out.push_back(EntryFile{p, s->size, s->mtime_ns});
  }
  return out;
}

void hash_param_value(KeyHasher& h, const ParamValue& v) {
  h.u64(v.index());
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>)
          h.u64(x ? 1 : 0);
        else if constexpr (std::is_same_v<T, int64_t>)
          h.u64(static_cast<uint64_t>(x));
        else if constexpr (std::is_same_v<T, double>)
          h.f64(x);
        else if constexpr (std::is_same_v<T, std::string>)
          h.text(x);
        else {
          h.u64(x.size());
          for (const auto& e : x) {
            if constexpr (std::is_same_v<std::decay_t<decltype(e)>, std::string>)
              h.text(e);
            else if constexpr (std::is_same_v<std::decay_t<decltype(e)>, double>)
              h.f64(e);
            else
              h.u64(static_cast<uint64_t>(e));
          }
        }
      },
      v);
}

}  // namespace

// ---- Keys --------------------------------------------------------------------------------------

std::string CacheKey::hex() const {
  return fmt::format("{:016x}{:016x}", hi, lo);
}

KeyHasher::KeyHasher() : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_));
}

KeyHasher::~KeyHasher() {
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void KeyHasher::bytes(const void* data, size_t size) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data, size);
}

void KeyHasher::text(std::string_view s) {
  u64(s.size());
  bytes(s.data(), s.size());
}

void KeyHasher::u64(uint64_t v) {
  bytes(&v, sizeof v);
}

void KeyHasher::f64(double v) {
  bytes(&v, sizeof v);
}

void KeyHasher::key(const CacheKey& k) {
  u64(k.hi);
  u64(k.lo);
}

CacheKey KeyHasher::digest() const {
  const XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  return CacheKey{h.high64, h.low64};
}

uint64_t checksum64(std::string_view bytes) {
  return XXH3_64bits(bytes.data(), bytes.size());
}

// ---- Store -------------------------------------------------------------------------------------

StageCache::StageCache(StageCacheOptions options, const Registry& codecs)
    : options_(std::move(options)), codecs_(codecs) {
  entries_dir_ = (fs::path(options_.dir) / "entries").string();
  files_dir_ = (fs::path(options_.dir) / "files").string();
  lock_path_ = (fs::path(options_.dir) / "lock").string();
  std::error_code ec;
  fs::create_directories(entries_dir_, ec);
  if (!ec) fs::create_directories(files_dir_, ec);
  if (ec)
    throw std::runtime_error(
        fmt::format("cannot create the stage cache in {}: {}", options_.dir, ec.message()));
}

std::string StageCache::entry_path(const CacheKey& key) const {
  return entries_dir_ + "/" + key.hex() + kEntrySuffix;
}

CacheKey StageCache::file_hash(const std::string& path) {
  std::error_code ec;
  const std::string abs = fs::absolute(path, ec).lexically_normal().string();
  const auto st = stat_file(abs);
  if (!st) throw std::runtime_error("cannot read " + path);
  const std::string memo_id = hash128(abs).hex();
  const std::string stamp = stat_text(*st);
  {
    std::lock_guard lock(mutex_);
    const auto it = file_memo_.find(abs + "\n" + stamp);
    if (it != file_memo_.end()) return it->second;
  }
  const std::string memo_path = files_dir_ + "/" + memo_id;
  CacheKey result;
  bool found = false;
  if (const auto memo = read_whole(memo_path)) {
    // "<path>\n<stat>\n<hash hex>\n"
    const std::string want = abs + "\n" + stamp + "\n";
    if (memo->size() == want.size() + 33 && memo->compare(0, want.size(), want) == 0) {
      const std::string hex = memo->substr(want.size(), 32);
      char* end = nullptr;
      result.hi = std::strtoull(hex.substr(0, 16).c_str(), &end, 16);
      result.lo = std::strtoull(hex.substr(16).c_str(), &end, 16);
      found = true;
    }
  }
  if (!found) {
    const int fd = ::open(abs.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot read " + path);
    XXH3_state_t* state = XXH3_createState();
    XXH3_128bits_reset(state);
    std::vector<char> buf(1 << 20);
    bool ok = true;
    for (;;) {
      const ssize_t n = ::read(fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) ok = false;
      if (n <= 0) break;
      XXH3_128bits_update(state, buf.data(), static_cast<size_t>(n));
    }
    ::close(fd);
    const XXH128_hash_t h = XXH3_128bits_digest(state);
    XXH3_freeState(state);
    if (!ok) throw std::runtime_error("cannot read " + path);
    result = CacheKey{h.high64, h.low64};
    try {
      write_atomically(memo_path, {abs + "\n" + stamp + "\n" + result.hex() + "\n"});
    } catch (const std::exception& e) {
      spdlog::debug("stage cache: {}", e.what());
    }
  }
  std::lock_guard lock(mutex_);
  file_memo_[abs + "\n" + stamp] = result;
  return result;
}

void StageCache::hash_directory(KeyHasher& h, const std::string& dir) {
  // A directory past this many files (a mesh lying in a home folder) is not hashed: the key gets
  // a value no other run shares, so what depends on it is never reused, and nothing is read.
  constexpr size_t kMaxFiles = 2000;
  std::vector<std::string> files;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path().lexically_relative(dir).string());
    if (files.size() > kMaxFiles) {
      spdlog::debug("stage cache: {} holds over {} files; not reused across runs", dir, kMaxFiles);
      static std::atomic<uint64_t> nonce{0};
      h.text("unhashed");
      h.u64(static_cast<uint64_t>(::getpid()));
      h.u64(nonce++);
      h.u64(static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
      return;
    }
  }
  std::sort(files.begin(), files.end());
  h.text("dir");
  h.u64(files.size());
  for (const std::string& rel : files) {
    h.text(rel);
    h.key(file_hash((fs::path(dir) / rel).string()));
  }
}

void StageCache::hash_path(KeyHasher& h, const std::string& path, bool siblings) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    h.text("missing");
    h.text(path);
    return;
  }
  if (fs::is_directory(st)) {
    hash_directory(h, path);
    return;
  }
  h.text("file");
  h.key(file_hash(path));
  // Files that name others (OBJ + MTL + textures, glTF + buffers, weights + config.json) count
  // with their directory; self-contained meshes do not.
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  const bool self_contained = ext == ".glb" || ext == ".ply" || ext == ".stl" || ext == ".off";
  if (siblings && !self_contained) hash_directory(h, fs::absolute(path, ec).parent_path().string());
}

std::vector<CacheKey> StageCache::node_keys(const Graph& graph) {
  std::vector<CacheKey> keys(graph.nodes.size());
  for (size_t i : graph.order) {
    const GraphNode& node = graph.nodes[i];
    const StageContract& c = *node.contract;
    KeyHasher h;
    h.text("gen3d-stage-cache/2");
    h.text(code_identity());
    h.text(c.name);
    h.u64(static_cast<uint64_t>(c.version));
    for (const auto& [param_name, value] : node.params) {
      const std::string& name = param_name;  // a named copy: clang 14 cannot capture a binding
      const auto fp = std::find_if(c.file_params.begin(), c.file_params.end(),
                                   [&](const FileParam& f) { return f.name == name; });
      const auto rp = std::find_if(c.resolved_params.begin(), c.resolved_params.end(),
                                   [&](const ResolvedParam& r) { return r.name == name; });
      h.text(name);
      if (rp != c.resolved_params.end() && std::holds_alternative<std::string>(value)) {
        h.text(rp->resolve(std::get<std::string>(value)));
        continue;
      }
      if (fp == c.file_params.end()) {
        hash_param_value(h, value);
        continue;
      }
      // A file parameter counts by the content it names, not by its spelling.
      std::vector<std::string> paths;
      if (const auto* s = std::get_if<std::string>(&value)) paths.push_back(*s);
      if (const auto* l = std::get_if<std::vector<std::string>>(&value)) paths = *l;
      h.u64(paths.size());
      for (const std::string& p : paths) {
        if (p.empty()) {
          h.text("");
          continue;
        }
        try {
          hash_path(h, p, fp->siblings);
        } catch (const std::exception& e) {
          h.text("unreadable");
          h.text(p);
        }
      }
    }
    for (const PortSpec& out : c.outputs) {
      h.text(out.name);
      h.text(out.type.name);
      const PortCodec* codec = codecs_.codec(out.type);
      h.u64(codec ? codec->version : 0);
    }
    std::vector<const Edge*> inputs;
    for (const Edge& e : node.inputs) inputs.push_back(&e);
    std::sort(inputs.begin(), inputs.end(),
              [](const Edge* a, const Edge* b) { return a->port < b->port; });
    h.u64(inputs.size());
    for (const Edge* e : inputs) {
      h.text(e->port);
      h.key(keys[e->from]);
      h.text(e->from_port);
    }
    keys[i] = h.digest();
  }
  return keys;
}

bool StageCache::contains(const CacheKey& key) const {
  return ::access(entry_path(key).c_str(), F_OK) == 0;
}

double StageCache::recorded_ms(const CacheKey& key) const {
  const int fd = ::open(entry_path(key).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char header[kHeaderBytes];
  const ssize_t n = ::pread(fd, header, sizeof header, 0);
  ::close(fd);
  if (n != static_cast<ssize_t>(sizeof header) || std::memcmp(header, kMagic, sizeof kMagic) != 0)
    return 0;
  double ms = 0;
  std::memcpy(&ms, header + kHeaderBytes - sizeof ms, sizeof ms);
  return std::isfinite(ms) && ms > 0 ? ms : 0;
}

bool StageCache::has_codecs(const GraphNode& node) const {
  for (const PortSpec& out : node.contract->outputs)
    if (!codecs_.codec(out.type)) return false;
  return !node.contract->outputs.empty();
}

uint64_t StageCache::estimate_bytes(
    const std::map<std::string, Value, std::less<>>& outputs) const {
  uint64_t total = kHeaderBytes;
  for (const auto& [port, value] : outputs) {
    const PortCodec* codec = codecs_.codec(value.type);
    if (!codec) return 0;
    total += codec->bytes(value.data.get()) + port.size() + value.type.name.size() + 32;
  }
  return total;
}

uint64_t StageCache::store(const CacheKey& key, const GraphNode& node,
                           const std::map<std::string, Value, std::less<>>& outputs,
                           double compute_ms, const std::vector<RecordedMetric>& metrics) {
  std::string payload;  // small fields; big arrays are written from the values themselves
  std::vector<ByteWriter::Borrowed> borrowed;
  try {
    ByteWriter w(payload, &borrowed);
    w.u32(static_cast<uint32_t>(metrics.size()));
    for (const RecordedMetric& m : metrics) {
      w.str(m.name);
      w.f64(m.value);
      w.u8(m.gauge ? 1 : 0);
    }
    w.u32(static_cast<uint32_t>(outputs.size()));
    for (const auto& [port, value] : outputs) {
      const PortCodec* codec = codecs_.codec(value.type);
      if (!codec) return 0;
      w.str(port);
      w.str(value.type.name);
      w.u32(codec->version);
      const size_t len_at = payload.size();
      w.u64(0);
      const size_t begin = w.size();
      codec->save(value.data.get(), w);
      const uint64_t len = w.size() - begin;
      std::memcpy(payload.data() + len_at, &len, sizeof len);
    }
    // The payload in file order: owned bytes with the borrowed ranges in between.
    std::vector<std::string_view> parts;
    size_t at = 0;
    for (const ByteWriter::Borrowed& b : borrowed) {
      parts.emplace_back(payload.data() + at, b.at - at);
      parts.push_back(b.bytes);
      at = b.at;
    }
    parts.emplace_back(payload.data() + at, payload.size() - at);
    XXH3_state_t* sum_state = XXH3_createState();
    XXH3_64bits_reset(sum_state);
    for (std::string_view part : parts) XXH3_64bits_update(sum_state, part.data(), part.size());
    const uint64_t sum = XXH3_64bits_digest(sum_state);
    XXH3_freeState(sum_state);
    std::string header;
    ByteWriter hw(header);
    header.append(kMagic, sizeof kMagic);
    hw.u32(kFormatVersion);
    hw.u32(0);
    hw.u64(key.hi);
    hw.u64(key.lo);
    hw.u64(w.size());
    hw.u64(sum);
    hw.f64(compute_ms);
    parts.insert(parts.begin(), header);
    write_atomically(entry_path(key), parts);
    return header.size() + w.size();
  } catch (const std::exception& e) {
    spdlog::warn("stage cache: could not store {} ({}): {}", node.id, node.contract->name,
                 e.what());
    return 0;
  }
}

std::optional<CachedOutputs> StageCache::load(const CacheKey& key, const GraphNode& node,
                                              bool* damaged) {
  if (damaged) *damaged = false;
  const std::string path = entry_path(key);
  const MappedFile file(path);
  if (!file.open()) return std::nullopt;
  const std::string_view whole = file.bytes();
  const std::string_view* bytes = &whole;
  try {
    if (bytes->size() < kHeaderBytes) throw CacheFormatError("shorter than its header");
    ByteReader r(*bytes);
    for (char m : kMagic)
      if (static_cast<char>(r.u8()) != m) throw CacheFormatError("not a stage cache entry");
    if (r.u32() != kFormatVersion) throw CacheFormatError("another format version");
    r.u32();
    CacheKey stored;
    stored.hi = r.u64();
    stored.lo = r.u64();
    if (!(stored == key)) throw CacheFormatError("holds another key");
    const uint64_t size = r.u64();
    const uint64_t sum = r.u64();
    CachedOutputs out;
    out.compute_ms = r.f64();
    out.bytes = bytes->size();
    if (size != bytes->size() - kHeaderBytes)
      throw CacheFormatError(
          fmt::format("truncated ({} of {} payload bytes)", bytes->size() - kHeaderBytes, size));
    const std::string_view payload(bytes->data() + kHeaderBytes, size);
    if (checksum64(payload) != sum) throw CacheFormatError("checksum mismatch");
    ByteReader p(payload);
    const uint32_t metric_count = p.u32();
    for (uint32_t k = 0; k < metric_count; ++k) {
      RecordedMetric m;
      m.name = p.str();
      m.value = p.f64();
      m.gauge = p.u8() != 0;
      out.metrics.push_back(std::move(m));
    }
    const uint32_t count = p.u32();
    for (uint32_t k = 0; k < count; ++k) {
      const std::string port = p.str();
      const std::string type = p.str();
      const uint32_t version = p.u32();
      const uint64_t len = p.u64();
      const PortSpec* spec = node.contract->find_output(port);
      if (!spec || spec->type.name != type)
        throw CacheFormatError("output \"" + port + "\" does not match the stage");
      const PortCodec* codec = codecs_.codec(spec->type);
      if (!codec || codec->version != version)
        throw CacheFormatError("output \"" + port + "\" has another codec version");
      if (len > p.remaining()) throw CacheFormatError("truncated value");
      const size_t at = payload.size() - p.remaining();
      ByteReader vr(payload.substr(at, static_cast<size_t>(len)));
      Value v{spec->type, codec->load(vr)};
      vr.expect_end();
      p.skip(len);
      out.outputs[port] = std::move(v);
    }
    p.expect_end();
    for (const PortSpec& spec : node.contract->outputs)
      if (!out.outputs.count(spec.name))
        throw CacheFormatError("output \"" + spec.name + "\" is missing");
    ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // most recently used
    return out;
  } catch (const std::exception& e) {
    if (damaged) *damaged = true;
    ::unlink(path.c_str());
    std::lock_guard lock(mutex_);
    if (warned_.insert(key.hex()).second)
      spdlog::warn("stage cache: the entry of {} ({}) is damaged ({}); deleted, recomputing",
                   node.id, node.contract->name, e.what());
    return std::nullopt;
  }
}

void StageCache::forget_missing_files() {
  std::error_code ec;
  size_t removed = 0;
  for (fs::directory_iterator it(files_dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const auto memo = read_whole(it->path().string());  // "<path>\n<stat>\n<hash hex>\n"
    if (!memo) continue;
    if (stat_file(memo->substr(0, memo->find('\n')))) continue;  // still there
    if (::unlink(it->path().c_str()) == 0) ++removed;
  }
  std::lock_guard guard(mutex_);
  for (auto it = file_memo_.begin(); it != file_memo_.end();)
    it =
        stat_file(it->first.substr(0, it->first.find('\n'))) ? std::next(it) : file_memo_.erase(it);
  if (removed > 0) spdlog::debug("stage cache: forgot the hashes of {} files gone", removed);
}

void StageCache::evict() {
  DirLock lock(lock_path_);
  forget_missing_files();
  std::vector<EntryFile> entries = list_entries(entries_dir_);
  uint64_t total = 0;
  for (const EntryFile& e : entries) total += e.bytes;
  if (total <= options_.budget_bytes) return;
  std::sort(entries.begin(), entries.end(),
            [](const EntryFile& a, const EntryFile& b) { return a.used_ns < b.used_ns; });
  size_t removed = 0;
  for (const EntryFile& e : entries) {
    if (total <= options_.budget_bytes) break;
    if (::unlink(e.path.c_str()) == 0 || errno == ENOENT) {
      total -= e.bytes;
      ++removed;
    }
  }
  spdlog::debug("stage cache: evicted {} entries, {} bytes kept", removed, total);
}

CacheInfo StageCache::info() const {
  CacheInfo info;
  info.dir = options_.dir;
  info.budget_bytes = options_.budget_bytes;
  for (const EntryFile& e : list_entries(entries_dir_)) {
    ++info.entries;
    info.bytes += e.bytes;
  }
  std::error_code ec;
  for (fs::directory_iterator it(files_dir_, ec), end; !ec && it != end; it.increment(ec))
    ++info.file_hashes;
  return info;
}

std::pair<uint64_t, uint64_t> StageCache::verify() {
  uint64_t good = 0, bad = 0;
  for (const EntryFile& e : list_entries(entries_dir_)) {
    const MappedFile file(e.path);
    if (!file.open()) continue;  // evicted meanwhile
    const std::string_view bytes = file.bytes();
    std::string why;
    try {
      if (bytes.size() < kHeaderBytes) throw CacheFormatError("shorter than its header");
      if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
        throw CacheFormatError("not a stage cache entry");
      ByteReader r(bytes.substr(sizeof kMagic));
      if (r.u32() != kFormatVersion) throw CacheFormatError("another format version");
      r.u32();
      CacheKey key;
      key.hi = r.u64();
      key.lo = r.u64();
      if (entry_path(key) != e.path) throw CacheFormatError("holds another key");
      const uint64_t size = r.u64();
      const uint64_t sum = r.u64();
      if (size != bytes.size() - kHeaderBytes) throw CacheFormatError("truncated");
      if (checksum64(bytes.substr(kHeaderBytes)) != sum)
        throw CacheFormatError("checksum mismatch");
      ++good;
    } catch (const std::exception& ex) {
      ++bad;
      spdlog::warn("stage cache: {} is damaged ({}); deleted", e.path, ex.what());
      ::unlink(e.path.c_str());
    }
  }
  return {good, bad};
}

void StageCache::clear() {
  DirLock lock(lock_path_);
  std::error_code ec;
  for (const std::string& dir : {entries_dir_, files_dir_})
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
      fs::remove(it->path(), ec);
  std::lock_guard guard(mutex_);
  file_memo_.clear();
}

std::string default_cache_dir() {
  if (const char* d = std::getenv("GEN3D_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return (fs::path(x) / "gen3d").string();
  if (const char* home = std::getenv("HOME"); home && *home)
    return (fs::path(home) / ".cache" / "gen3d").string();
  return (fs::temp_directory_path() / "gen3d-cache").string();
}

uint64_t parse_byte_size(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (!unit.empty() && unit.back() == 'i') unit.pop_back();
  double scale = 1;
  if (unit == "K" || unit == "k")
    scale = 1024.0;
  else if (unit == "M" || unit == "m")
    scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "g")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T" || unit == "t")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty())
    used = 0;
  if (used == 0 || value < 0)
    throw ConfigError("\"" + text + "\": expected a byte size such as 512M or 20G");
  return static_cast<uint64_t>(value * scale);
}

bool StageCache::claim(const std::vector<CacheKey>& keys, std::vector<CacheKey>& busy) {
  std::lock_guard lock(claims_mutex_);
  busy.clear();
  for (const CacheKey& k : keys)
    if (claims_.contains({k.hi, k.lo})) busy.push_back(k);
  if (!busy.empty()) return false;
  for (const CacheKey& k : keys) claims_.insert({k.hi, k.lo});
  return true;
}

void StageCache::release(const CacheKey& key) {
  {
    std::lock_guard lock(claims_mutex_);
    if (claims_.erase({key.hi, key.lo}) == 0) return;
  }
  claims_released_.notify_all();
}

void StageCache::wait_released(const std::vector<CacheKey>& keys) {
  std::unique_lock lock(claims_mutex_);
  claims_released_.wait(lock, [&] {
    return std::none_of(keys.begin(), keys.end(), [&](const CacheKey& k) {
      return claims_.contains({k.hi, k.lo});
    });
  });
}

}  // namespace gen3d::pipeline
