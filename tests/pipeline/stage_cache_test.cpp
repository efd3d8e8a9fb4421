// The stage cache: keys follow parameters, inputs and file contents; a second run loads what did
// not change and runs only what did; damaged entries are recomputed; the byte budget evicts the
// least recently used entries.

#include <fcntl.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "pipeline/error.h"
#include "pipeline/executor.h"
#include "pipeline/stage_cache.h"
#include "support/paths.h"
#include "test_stages.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using pipeline::NodeStatus;

// Reads a text file named by its "path" parameter: the file's content is part of its key.
class ReadText final : public pipeline::Stage {
 public:
  pipeline::StageContract contract() const override {
    return pipeline::StageContract("test_read_text", "read a text file")
        .output<Text>("text")
        .required<std::string>("path", "file")
        .reads_files("path");
  }
  void run(pipeline::StageContext& ctx) const override {
    std::ifstream in(ctx.param<std::string>("path"));
    ctx.out("text",
            std::make_shared<Text>(Text{std::string((std::istreambuf_iterator<char>(in)), {})}));
  }
};

// A number whose "mode" parameter, like a network's precision "auto", means what this machine
// makes of it: here "auto" is "fast".
class Moded final : public pipeline::Stage {
 public:
  pipeline::StageContract contract() const override {
    return pipeline::StageContract("test_moded", "a number computed in a mode")
        .output<Number>("value")
        .choice("mode", "auto", {"auto", "fast", "exact"}, "mode")
        .keys_by("mode", [](const std::string& m) { return m == "auto" ? "fast" : m; });
  }
  void run(pipeline::StageContext& ctx) const override {
    ctx.out("value", std::make_shared<Number>(Number{1.0}));
  }
};

// A side effect: what a run is for.
class Sink final : public pipeline::Stage {
 public:
  pipeline::StageContract contract() const override {
    return pipeline::StageContract("test_sink", "consume a number").input<Number>("v");
  }
  void run(pipeline::StageContext& ctx) const override { ctx.in<Number>("v"); }
};

// A slow computation that counts how often it ran in this process.
std::atomic<int> g_slow_runs{0};
class SlowCount final : public pipeline::Stage {
 public:
  pipeline::StageContract contract() const override {
    return pipeline::StageContract("test_slow_count", "a number that takes a while")
        .output<Number>("value")
        .param<double>("value", 1.0, pipeline::Range{-1e9, 1e9}, "the number");
  }
  void run(pipeline::StageContext& ctx) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ++g_slow_runs;
    ctx.out("value", std::make_shared<Number>(Number{ctx.param<double>("value")}));
  }
};

// A number that reports a gauge and a count, as stages report their figures.
class Reporting final : public pipeline::Stage {
 public:
  pipeline::StageContract contract() const override {
    return pipeline::StageContract("test_reporting", "a number with figures")
        .output<Number>("value");
  }
  void run(pipeline::StageContext& ctx) const override {
    ctx.gauge("test.level", 0.25);
    ctx.count("test.items", 3);
    ctx.out("value", std::make_shared<Number>(Number{2.0}));
  }
};

const pipeline::Registry& cache_registry() {
  static const pipeline::Registry reg = [] {
    pipeline::Registry r;
    register_test_stages(r);
    r.add<ReadText>();
    r.add<Sink>();
    r.add<Moded>();
    r.add<SlowCount>();
    r.add<Reporting>();
    r.add_codec<Number>(
        1, [](const Number& n, pipeline::ByteWriter& w) { w.f64(n.value); },
        [](pipeline::ByteReader& r) { return Number{r.f64()}; }, [](const Number&) { return 8; });
    r.add_codec<Text>(
        1, [](const Text& t, pipeline::ByteWriter& w) { w.str(t.value); },
        [](pipeline::ByteReader& r) { return Text{r.str()}; },
        [](const Text& t) { return 8 + t.value.size(); });
    return r;
  }();
  return reg;
}

pipeline::Graph graph(const std::string& json, const std::vector<std::string>& sets = {}) {
  pipeline::PipelineConfig cfg = config_from(json);
  pipeline::apply_overrides(cfg, sets);
  return pipeline::build_graph(cfg, cache_registry());
}

pipeline::StageCacheOptions store_everything(const std::string& dir) {
  pipeline::StageCacheOptions o;
  o.dir = dir;
  o.min_store_ms = 0;
  o.store_factor = 0;
  return o;
}

struct Ran {
  pipeline::RunResult result;
  std::map<std::string, NodeStatus> status;
};

Ran run(const pipeline::Graph& g, pipeline::StageCache& cache, bool elide = true) {
  pipeline::Profiler profiler;
  pipeline::ExecutorOptions o;
  o.cache = &cache;
  o.elide_unused = elide;
  Ran r{pipeline::execute(g, profiler, o), {}};
  for (const auto& n : r.result.nodes) r.status[n.id] = n.status;
  return r;
}

std::set<std::string> with_status(const Ran& r, NodeStatus s) {
  std::set<std::string> out;
  for (const auto& [id, st] : r.status)
    if (st == s) out.insert(id);
  return out;
}

const char* kSum = R"({"vars": {"a": 2, "b": 3.5}, "nodes": [
    {"id": "x", "stage": "test_const", "params": {"value": "$a"}},
    {"id": "y", "stage": "test_const", "params": {"value": "$b"}},
    {"id": "s", "stage": "test_add", "inputs": {"a": "x.value", "b": "y.value"}},
    {"id": "t", "stage": "test_add", "inputs": {"a": "s.sum", "b": "x.value"}},
    {"id": "out", "stage": "test_sink", "inputs": {"v": "t.sum"}}]})";

TEST(StageCache, SecondRunLoadsEveryNodeWithEqualValues) {
  pipeline::StageCache cache(store_everything(temp_dir("stage_cache_second")), cache_registry());
  const auto g = graph(kSum);
  const Ran first = run(g, cache, false);
  ASSERT_TRUE(first.result.ok());
  EXPECT_EQ(with_status(first, NodeStatus::Done),
            (std::set<std::string>{"x", "y", "s", "t", "out"}));
  const Ran second = run(g, cache, false);
  ASSERT_TRUE(second.result.ok());
  EXPECT_EQ(with_status(second, NodeStatus::Cached), (std::set<std::string>{"x", "y", "s", "t"}));
  EXPECT_EQ(with_status(second, NodeStatus::Done), (std::set<std::string>{"out"}));
  for (const auto& n : second.result.nodes) EXPECT_EQ(n.loaded, n.id != "out") << n.id;
  EXPECT_EQ(second.result.output<Number>(g, "t", "sum")->value, 7.5);
}

TEST(StageCache, AChangedParameterRerunsExactlyWhatDependsOnIt) {
  pipeline::StageCache cache(store_everything(temp_dir("stage_cache_param")), cache_registry());
  ASSERT_TRUE(run(graph(kSum), cache).result.ok());
  const auto g = graph(kSum, {"b=4.5"});
  const Ran r = run(g, cache);
  ASSERT_TRUE(r.result.ok());
  // y changed; s and t read it; x is loaded for s and t, not run.
  EXPECT_EQ(with_status(r, NodeStatus::Done), (std::set<std::string>{"y", "s", "t", "out"}));
  EXPECT_EQ(with_status(r, NodeStatus::Cached), (std::set<std::string>{"x"}));
  EXPECT_EQ(r.result.output<Number>(g, "t", "sum")->value, 8.5);
  // The same change again: nothing runs, and only the result is read from the cache.
  const Ran again = run(g, cache);
  EXPECT_EQ(with_status(again, NodeStatus::Done), (std::set<std::string>{"out"}));
  for (const auto& n : again.result.nodes) EXPECT_EQ(n.loaded, n.id == "t") << n.id;
}

TEST(StageCache, KeysFollowParametersInputsAndStageVersion) {
  pipeline::StageCache cache(store_everything(temp_dir("stage_cache_keys")), cache_registry());
  const auto k1 = cache.node_keys(graph(kSum));
  const auto k2 = cache.node_keys(graph(kSum));
  const auto k3 = cache.node_keys(graph(kSum, {"a=2.5"}));
  EXPECT_EQ(k1, k2);
  ASSERT_EQ(k1.size(), 5u);
  EXPECT_NE(k1[0], k3[0]);  // x's parameter
  EXPECT_EQ(k1[1], k3[1]);  // y does not read x
  EXPECT_NE(k1[2], k3[2]);  // s reads x
  // Same values, spelled by another config: the same keys.
  const auto k4 = cache.node_keys(graph(R"({"nodes": [
      {"id": "x", "stage": "test_const", "params": {"value": 2}},
      {"id": "y", "stage": "test_const", "params": {"value": 3.5}},
      {"id": "s", "stage": "test_add", "inputs": {"b": "y.value", "a": "x.value"}},
      {"id": "t", "stage": "test_add", "inputs": {"a": "s.sum", "b": "x.value"}},
      {"id": "out", "stage": "test_sink", "inputs": {"v": "t.sum"}}]})"));
  EXPECT_EQ(k1, k4);
}

TEST(StageCache, ResolvedParametersAreKeyedByWhatTheyMeanHere) {
  pipeline::StageCache cache(store_everything(temp_dir("stage_cache_resolved")), cache_registry());
  const auto key = [&](const std::string& mode) {
    return cache.node_keys(graph(R"({"nodes": [
        {"id": "m", "stage": "test_moded", "params": {"mode": ")" +
                                 mode + R"("}},
        {"id": "out", "stage": "test_sink", "inputs": {"v": "m.value"}}]})"))[0];
  };
  EXPECT_EQ(key("auto"), key("fast"));
  EXPECT_NE(key("auto"), key("exact"));
}

TEST(StageCache, FileContentChangesTheKeyEvenWithSizeAndTimesRestored) {
  const std::string dir = temp_dir("stage_cache_file");
  const std::string file = dir + "/in.txt";
  std::ofstream(file) << "alpha";
  pipeline::StageCache cache(store_everything(dir + "/cache"), cache_registry());
  const auto g = graph(R"({"nodes": [{"id": "r", "stage": "test_read_text",
                                       "params": {"path": ")" +
                       file + R"("}}]})");
  // A graph with no side effect runs everything anyway (nothing else to elide for).
  EXPECT_EQ(run(g, cache, false).status.at("r"), NodeStatus::Done);
  EXPECT_EQ(run(g, cache, false).status.at("r"), NodeStatus::Cached);

  struct stat before {};
  ASSERT_EQ(::stat(file.c_str(), &before), 0);
  std::ofstream(file) << "omega";  // same size
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(::stat(file.c_str(), &after), 0);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);

  const Ran r = run(g, cache, false);
  EXPECT_EQ(r.status.at("r"), NodeStatus::Done);
  EXPECT_EQ(r.result.output<Text>(g, "r", "text")->value, "omega");
}

TEST(StageCache, DamagedEntriesAreRecomputedAndReplaced) {
  const std::string dir = temp_dir("stage_cache_damaged");
  pipeline::StageCache cache(store_everything(dir), cache_registry());
  const auto g = graph(kSum);
  ASSERT_TRUE(run(g, cache, false).result.ok());
  const auto keys = cache.node_keys(g);
  {  // s: one flipped byte in the middle; t: cut short
    std::fstream f(cache.entry_path(keys[2]), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(cache.entry_path(keys[2])) - 3));
    f.put('\x7f');
  }
  fs::resize_file(cache.entry_path(keys[3]), fs::file_size(cache.entry_path(keys[3])) - 5);
  const Ran r = run(g, cache);  // t's damage is found after s and x were elided: planned again
  ASSERT_TRUE(r.result.ok()) << r.result.error.value_or("");
  EXPECT_EQ(r.result.output<Number>(g, "t", "sum")->value, 7.5);
  EXPECT_EQ(r.status.at("t"), NodeStatus::Done);
  EXPECT_EQ(r.status.at("s"), NodeStatus::Done);
  EXPECT_EQ(cache.verify(), (std::pair<uint64_t, uint64_t>{4, 0}));
}

TEST(StageCache, BudgetEvictsTheLeastRecentlyUsedEntries) {
  const std::string dir = temp_dir("stage_cache_evict");
  pipeline::StageCacheOptions o = store_everything(dir);
  pipeline::StageCache cache(o, cache_registry());
  const auto g = graph(R"({"nodes": [
      {"id": "a", "stage": "test_const", "params": {"value": 1}},
      {"id": "b", "stage": "test_const", "params": {"value": 2}},
      {"id": "c", "stage": "test_const", "params": {"value": 3}}]})");
  ASSERT_TRUE(run(g, cache, false).result.ok());
  const auto keys = cache.node_keys(g);
  // Use order: b long ago, then c, then a most recently.
  const auto touch = [&](size_t i, time_t sec) {
    const timespec t[2] = {{sec, 0}, {sec, 0}};
    ASSERT_EQ(::utimensat(AT_FDCWD, cache.entry_path(keys[i]).c_str(), t, 0), 0);
  };
  touch(1, 1000);
  touch(2, 2000);
  touch(0, 3000);
  const uint64_t one = fs::file_size(cache.entry_path(keys[0]));
  o.budget_bytes = 2 * one;  // room for two
  pipeline::StageCache small(o, cache_registry());
  small.evict();
  EXPECT_TRUE(fs::exists(small.entry_path(keys[0])));
  EXPECT_FALSE(fs::exists(small.entry_path(keys[1])));
  EXPECT_TRUE(fs::exists(small.entry_path(keys[2])));
  EXPECT_EQ(small.info().entries, 2u);
  // Loading marks an entry used: after loading c, c outlives a.
  ASSERT_TRUE(small.load(keys[2], g.nodes[2]));
  o.budget_bytes = one;
  pipeline::StageCache tiny(o, cache_registry());
  tiny.evict();
  EXPECT_TRUE(fs::exists(tiny.entry_path(keys[2])));
  EXPECT_FALSE(fs::exists(tiny.entry_path(keys[0])));
}

// The hashes of input files are remembered by path; once a file is gone (a server's upload
// after its job is dropped), eviction forgets its hash, here and in the store, and keeps the
// others'.
TEST(StageCache, HashesOfFilesThatAreGoneAreForgotten) {
  const std::string dir = temp_dir("stage_cache_forget");
  const std::string kept = dir + "/kept.txt", gone = dir + "/gone.txt";
  std::ofstream(kept) << "alpha";
  std::ofstream(gone) << "omega";
  pipeline::StageCache cache(store_everything(dir + "/cache"), cache_registry());
  const pipeline::CacheKey k = cache.file_hash(kept), g = cache.file_hash(gone);
  EXPECT_FALSE(k == g);
  EXPECT_EQ(cache.info().file_hashes, 2u);
  cache.evict();
  EXPECT_EQ(cache.info().file_hashes, 2u);  // both files are there
  fs::remove(gone);
  cache.evict();
  EXPECT_EQ(cache.info().file_hashes, 1u);
  EXPECT_TRUE(cache.file_hash(kept) == k);
  // A file made again at the same path is hashed afresh.
  std::ofstream(gone) << "delta";
  EXPECT_FALSE(cache.file_hash(gone) == g);
  EXPECT_EQ(cache.info().file_hashes, 2u);
}

TEST(StageCache, UnneededNodesAreNeitherRunNorLoaded) {
  pipeline::StageCache cache(store_everything(temp_dir("stage_cache_unneeded")), cache_registry());
  const auto g = graph(R"({"nodes": [
      {"id": "x", "stage": "test_const", "params": {"value": 1}},
      {"id": "u", "stage": "test_const", "params": {"value": 9}},
      {"id": "out", "stage": "test_sink", "inputs": {"v": "x.value"}}]})");
  // Nothing reads u: with elision it does not run.
  const Ran first = run(g, cache);
  EXPECT_EQ(with_status(first, NodeStatus::Done), (std::set<std::string>{"x", "out"}));
  EXPECT_EQ(with_status(first, NodeStatus::Unused), (std::set<std::string>{"u"}));
  // Run everything once; then u shows as cached without being read, x is loaded for the sink.
  ASSERT_TRUE(run(g, cache, false).result.ok());
  const Ran r = run(g, cache);
  EXPECT_EQ(with_status(r, NodeStatus::Cached), (std::set<std::string>{"x", "u"}));
  for (const auto& n : r.result.nodes) EXPECT_EQ(n.loaded, n.id == "x") << n.id;
}

// Two runs of one process on one cache at the same time (a batch's jobs on one mesh) compute a
// shared node once: the second waits for the first's claim, then loads what it stored.
TEST(StageCache, ConcurrentRunsComputeASharedNodeOnce) {
  pipeline::StageCache cache(store_everything(temp_dir("stage_cache_single_flight")),
                             cache_registry());
  const auto shared = [](double job) {
    return graph(R"({"nodes": [
        {"id": "mesh", "stage": "test_slow_count", "params": {"value": 4}},
        {"id": "job", "stage": "test_const", "params": {"value": )" +
                 std::to_string(job) + R"(}},
        {"id": "s", "stage": "test_add", "inputs": {"a": "mesh.value", "b": "job.value"}},
        {"id": "out", "stage": "test_sink", "inputs": {"v": "s.sum"}}]})");
  };
  const auto g1 = shared(1), g2 = shared(2);
  g_slow_runs = 0;
  Ran r1, r2;
  std::thread t1([&] { r1 = run(g1, cache); });
  std::thread t2([&] { r2 = run(g2, cache); });
  t1.join();
  t2.join();
  ASSERT_TRUE(r1.result.ok()) << r1.result.error.value_or("");
  ASSERT_TRUE(r2.result.ok()) << r2.result.error.value_or("");
  EXPECT_EQ(g_slow_runs.load(), 1);
  EXPECT_EQ(r1.status.at("mesh") == NodeStatus::Cached, r2.status.at("mesh") == NodeStatus::Done);
  EXPECT_EQ(r1.result.output<Number>(g1, "s", "sum")->value, 5.0);
  EXPECT_EQ(r2.result.output<Number>(g2, "s", "sum")->value, 6.0);
}

// A node loaded from the cache reports the figures it reported when it ran.
TEST(StageCache, LoadedNodesReportTheirFiguresAgain) {
  pipeline::StageCache cache(store_everything(temp_dir("stage_cache_figures")), cache_registry());
  const auto g = graph(R"({"nodes": [{"id": "r", "stage": "test_reporting"},
      {"id": "out", "stage": "test_sink", "inputs": {"v": "r.value"}}]})");
  for (int pass = 0; pass < 2; ++pass) {
    pipeline::Profiler profiler;
    pipeline::ExecutorOptions o;
    o.cache = &cache;
    const pipeline::RunResult r = pipeline::execute(g, profiler, o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r.nodes[0].loaded, pass == 1);
    const auto totals = profiler.counter_totals();
    EXPECT_EQ(totals.at("test.level"), 0.25) << "pass " << pass;
    EXPECT_EQ(totals.at("test.items"), 3.0) << "pass " << pass;
  }
}

TEST(StageCache, ByteSizesParse) {
  EXPECT_EQ(pipeline::parse_byte_size("512M"), 512ull << 20);
  EXPECT_EQ(pipeline::parse_byte_size("20G"), 20ull << 30);
  EXPECT_EQ(pipeline::parse_byte_size("1.5KiB"), 1536u);
  EXPECT_EQ(pipeline::parse_byte_size("100"), 100u);
  EXPECT_THROW(pipeline::parse_byte_size("lots"), pipeline::ConfigError);
  EXPECT_THROW(pipeline::parse_byte_size("5X"), pipeline::ConfigError);
}

}  // namespace
}  // namespace gen3d::test
