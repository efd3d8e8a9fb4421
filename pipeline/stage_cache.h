#pragma once
// StageCache: a content-addressed store of node outputs on disk, shared across runs and
// processes. A node's key hashes its stage name and version, its resolved parameters, the content
// of the files it reads and its inputs' keys (graph.h nodes, in topological order), so two runs
// that would compute the same value get the same key.
//
// On disk: DIR/entries/<key>.g3c, one file per node result: a header (magic, format version, key,
// payload size, payload checksum, the time the node took) and the outputs, each with its port
// name, type name and codec version. Writes go to a temporary sibling and are renamed into place,
// so readers only ever see complete files and concurrent writers of one key leave one of their
// identical copies. A load touches the file's modification time: eviction deletes the least
// recently used entries until the store fits its byte budget, under an flock on DIR/lock. A file
// that does not verify (truncated, flipped bytes, another format) is logged, deleted and counts as
// a miss: a run never fails because of the cache.
//
// File contents are hashed with XXH3-128 and remembered in DIR/files/ by path, device, inode,
// size, modification and change time: unchanged files are not read again, and a rewrite that
// restores size and modification time still changes the change time.

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/stage.h"

namespace gen3d::pipeline {

struct GraphNode;
struct Graph;

struct CacheKey {
  uint64_t hi = 0, lo = 0;
  std::string hex() const;  // 32 lowercase hex digits
  bool operator==(const CacheKey&) const = default;
};

// Streaming XXH3-128 over typed fields (each field is length- or type-prefixed, so different
// field sequences cannot collide by concatenation).
class KeyHasher {
 public:
  KeyHasher();
  ~KeyHasher();
  KeyHasher(const KeyHasher&) = delete;
  KeyHasher& operator=(const KeyHasher&) = delete;
  void bytes(const void* data, size_t size);
  void text(std::string_view s);
  void u64(uint64_t v);
  void f64(double v);
  void key(const CacheKey& k);
  CacheKey digest() const;

 private:
  void* state_;
};

// XXH3-64 of a byte range (entry checksums).
uint64_t checksum64(std::string_view bytes);

struct StageCacheOptions {
  std::string dir;                      // created when missing
  uint64_t budget_bytes = 20ull << 30;  // eviction keeps the entries under this
  // Auto-policy nodes are stored when recomputing them (their own time plus what they need
  // upstream: loading what is stored, recomputing what is not) takes at least min_store_ms and
  // at least store_factor times the estimated load time (serialized bytes at load_mb_per_s).
  double min_store_ms = 100.0;
  double store_factor = 4.0;
  // Loading (map, checksum, decode) ran at 700-830 MB/s for 71-157 MB entries on the 2-core
  // reference machine under load; a little below that, so ties go to recomputing.
  double load_mb_per_s = 600.0;
};

struct CacheInfo {
  std::string dir;
  uint64_t entries = 0;
  uint64_t bytes = 0;
  uint64_t budget_bytes = 0;
  uint64_t file_hashes = 0;  // remembered file content hashes
};

// One node's outputs as the cache returns them, and what the entry recorded.
struct CachedOutputs {
  std::map<std::string, Value, std::less<>> outputs;
  double compute_ms = 0;                // how long the node took when it was stored
  uint64_t bytes = 0;                   // entry size on disk
  std::vector<RecordedMetric> metrics;  // what the node counted and gauged when it ran
};

class StageCache {
 public:
  // Opens (creating) the store; throws IoError-like std::runtime_error when DIR cannot be made.
  StageCache(StageCacheOptions options, const Registry& codecs);

  const StageCacheOptions& options() const { return options_; }

  // Keys of every node of `graph`, in node order. A node whose files cannot be hashed (missing:
  // it will fail when it runs) gets a key that covers the path and the failure.
  std::vector<CacheKey> node_keys(const Graph& graph);

  bool contains(const CacheKey& key) const;
  // The node time recorded in an entry's header (0 when absent or unreadable); reads 56 bytes.
  double recorded_ms(const CacheKey& key) const;
  // The entry's outputs, or nothing on a miss. A damaged entry is deleted and logged (once per
  // process and key) and counts as a miss; `damaged` is set then.
  std::optional<CachedOutputs> load(const CacheKey& key, const GraphNode& node,
                                    bool* damaged = nullptr);
  // Serializes and stores `outputs` (every output port of `node`); returns the bytes written, 0
  // when a port type has no codec. I/O errors are logged, never thrown.
  uint64_t store(const CacheKey& key, const GraphNode& node,
                 const std::map<std::string, Value, std::less<>>& outputs, double compute_ms,
                 const std::vector<RecordedMetric>& metrics = {});
  // Estimated serialized size of `outputs` (0 when a type has no codec).
  uint64_t estimate_bytes(const std::map<std::string, Value, std::less<>>& outputs) const;
  bool has_codecs(const GraphNode& node) const;

  // Deletes least recently used entries until the store fits the budget, and forgets the hashes
  // of files that are gone (a server's uploads once their job is dropped), so the remembered
  // hashes stay as many as the files still there.
  void evict();

  CacheInfo info() const;
  void clear();
  // Checks every entry's header and payload checksum; deletes the damaged ones. {good, damaged}.
  std::pair<uint64_t, uint64_t> verify();

  // Content hash of a file (or every file under a directory), remembered across processes.
  CacheKey file_hash(const std::string& path);

  std::string entry_path(const CacheKey& key) const;

  // One computation per key among the runs sharing this cache in a process (a batch's concurrent
  // jobs on one mesh): a run claims the keys it will compute before its graph starts. When another
  // run holds one of them, nothing is claimed, `busy` lists them, and the run waits (on its own
  // thread, before any task starts) with wait_released, then plans again: what the other stored
  // is loaded, what it did not store is computed. Claims are released once the node's result is
  // stored or known not to be.
  bool claim(const std::vector<CacheKey>& keys, std::vector<CacheKey>& busy);
  void release(const CacheKey& key);
  void wait_released(const std::vector<CacheKey>& keys);

 private:
  void hash_path(KeyHasher& h, const std::string& path, bool siblings);
  void hash_directory(KeyHasher& h, const std::string& dir);
  void forget_missing_files();
  StageCacheOptions options_;
  const Registry& codecs_;
  std::string entries_dir_, files_dir_, lock_path_;
  std::mutex mutex_;
  std::map<std::string, CacheKey> file_memo_;  // this process: absolute path + stat -> hash
  std::set<std::string> warned_;
  std::mutex claims_mutex_;
  std::condition_variable claims_released_;
  std::set<std::pair<uint64_t, uint64_t>> claims_;
};

// The default store: $GEN3D_CACHE_DIR, else $XDG_CACHE_HOME/gen3d, else ~/.cache/gen3d.
std::string default_cache_dir();

// "20G", "512M", "1048576" -> bytes; throws ConfigError on anything else.
uint64_t parse_byte_size(const std::string& text);

}  // namespace gen3d::pipeline
