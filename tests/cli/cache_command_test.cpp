// The stage cache through the CLI: a changed parameter re-runs exactly the nodes it reaches and
// the output matches an uncached run byte for byte; a changed input file is noticed by content;
// damaged entries are recomputed with one warning each; concurrent processes share a store; batch
// jobs that share a mesh share its nodes.

#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSpider = "assets/meshes/spider/spider.obj";
const std::string kFront = "assets/images/spider_front.png";
const std::string kSmall = " --texture-size 256 --render-size 256 ";

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

std::set<std::string> nodes_with(const json& metrics, const std::string& status) {
  std::set<std::string> out;
  for (const json& n : metrics["nodes"])
    if (n["status"] == status) out.insert(n["id"].get<std::string>());
  return out;
}

const json& node(const json& metrics, const std::string& id) {
  for (const json& n : metrics["nodes"])
    if (n["id"] == id) return n;
  throw std::runtime_error("no node " + id);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// texture on the spider with the stage cache in `cache` (every cacheable node stored).
CommandResult texture(const std::string& cache, const std::string& out, const std::string& extra) {
  return run_gen3d("texture --mesh " + kSpider + " --image " + kFront + kSmall + "-o " + out +
                   " --cache " + cache + " --cache-all " + extra);
}

TEST(CacheCommand, AChangedParameterRerunsOnlyWhatItReaches) {
  const std::string dir = temp_dir("cache_cli_param");
  const std::string cache = dir + "/cache";
  const auto first = texture(cache, dir + "/a.glb", "--metrics " + dir + "/m1.json");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const json m1 = read_json(dir + "/m1.json");
  for (const json& n : m1["nodes"]) EXPECT_FALSE(n["cached"].get<bool>()) << n["id"];

  const auto second = texture(
      cache, dir + "/b.glb",
      "--set inpaint.algorithm=telea --metrics " + dir + "/m2.json --trace " + dir + "/t2.json");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const json m2 = read_json(dir + "/m2.json");
  // inpaint changed; the bake report and the save read it; everything else comes from the cache.
  EXPECT_EQ(nodes_with(m2, "done"), (std::set<std::string>{"inpaint", "report", "save"}));
  EXPECT_TRUE(node(m2, "merge")["cached"].get<bool>());
  EXPECT_TRUE(node(m2, "merge")["loaded"].get<bool>());
  EXPECT_TRUE(node(m2, "uv")["cached"].get<bool>());
  EXPECT_FALSE(node(m2, "inpaint")["cached"].get<bool>());
  EXPECT_GT(m2["cache"]["saved_ms"].get<double>(), 0.0);
  EXPECT_NE(second.output.find("cached,"), std::string::npos) << "the summary marks cached nodes";
  const std::string trace = read_bytes(dir + "/t2.json");
  EXPECT_NE(trace.find("\"cat\":\"cached\""), std::string::npos);

  // The same config without the cache: the same bytes.
  const auto plain =
      run_gen3d("texture --mesh " + kSpider + " --image " + kFront + kSmall + "-o " + dir +
                "/c.glb --no-cache --set inpaint.algorithm=telea --metrics " + dir + "/m3.json");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(read_bytes(dir + "/b.glb"), read_bytes(dir + "/c.glb"));
  EXPECT_FALSE(read_json(dir + "/m3.json").contains("cache"));

  // Nothing changed: nothing but the side effects runs, and the output is the same again.
  const auto third =
      texture(cache, dir + "/d.glb", "--set inpaint.algorithm=telea --metrics " + dir + "/m4.json");
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_EQ(nodes_with(read_json(dir + "/m4.json"), "done"),
            (std::set<std::string>{"report", "save"}));
  EXPECT_EQ(read_bytes(dir + "/b.glb"), read_bytes(dir + "/d.glb"));

  // With a report every node's outputs are needed: the cached ones are loaded, and the report
  // shows them.
  const auto reported =
      texture(cache, dir + "/e.glb", "--set inpaint.algorithm=telea --report " + dir + "/r.html");
  ASSERT_EQ(reported.exit_code, 0) << reported.output;
  const std::string html = read_bytes(dir + "/r.html");
  EXPECT_NE(html.find("<td>loaded, "), std::string::npos);
  EXPECT_NE(html.find("class=cached"), std::string::npos);
  EXPECT_EQ(read_bytes(dir + "/b.glb"), read_bytes(dir + "/e.glb"));
}

TEST(CacheCommand, AnInputFileIsKnownByItsContent) {
  const std::string dir = temp_dir("cache_cli_content");
  fs::copy("assets/meshes/spider", dir + "/spider", fs::copy_options::recursive);
  const std::string mesh = dir + "/spider/spider.obj";
  const auto run = [&](const std::string& name) {
    const auto r = run_gen3d("texture --mesh " + mesh + " --image " + kFront + kSmall + "-o " +
                             dir + "/" + name + ".glb --cache " + dir + "/cache --cache-all" +
                             " --metrics " + dir + "/" + name + ".json");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return read_json(dir + "/" + name + ".json");
  };
  run("first");
  EXPECT_TRUE(node(run("same"), "uv")["cached"].get<bool>());

  // One digit of one vertex changes; the size and modification time are put back.
  struct stat before {};
  ASSERT_EQ(::stat(mesh.c_str(), &before), 0);
  std::string text = read_bytes(mesh);
  const size_t at = text.find("v 1.160379");
  ASSERT_NE(at, std::string::npos);
  text[at + 2] = '2';
  std::ofstream(mesh, std::ios::binary | std::ios::trunc) << text;
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, mesh.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(::stat(mesh.c_str(), &after), 0);
  ASSERT_EQ(after.st_size, before.st_size);
  ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);

  const json changed = run("changed");
  for (const char* id : {"mesh", "clean", "uv", "normalize", "bake", "merge", "inpaint"})
    EXPECT_EQ(node(changed, id)["status"], "done") << id;
}

TEST(CacheCommand, DamagedEntriesAreRecomputedWithOneWarningEach) {
  const std::string dir = temp_dir("cache_cli_damaged");
  const std::string cache = dir + "/cache";
  const auto first = texture(cache, dir + "/a.glb", "--metrics " + dir + "/m1.json");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const json m1 = read_json(dir + "/m1.json");
  const auto entry = [&](const std::string& id) {
    return cache + "/entries/" + node(m1, id)["cache_key"].get<std::string>() + ".g3c";
  };
  ASSERT_TRUE(fs::exists(entry("inpaint")));
  ASSERT_TRUE(fs::exists(entry("merge")));
  {  // flipped bytes in the middle of inpaint's entry
    std::fstream f(entry("inpaint"), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(entry("inpaint")) / 2));
    f.write("\xde\xad\xbe\xef", 4);
  }
  fs::resize_file(entry("merge"), fs::file_size(entry("merge")) / 3);  // cut short

  const auto second = texture(cache, dir + "/b.glb", "--metrics " + dir + "/m2.json");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_EQ(count(second.output, "is damaged"), 2u) << second.output;
  const json m2 = read_json(dir + "/m2.json");
  EXPECT_EQ(node(m2, "inpaint")["status"], "done");
  // merge is recomputed; the inpaint entry found damaged after that (its other producer, the
  // fill node, was left out of the plan as not needed) plans the run again, and that last round,
  // the one the metrics show, loads merge from the entry its recomputation stored.
  const std::string merge_status = node(m2, "merge")["status"];
  EXPECT_TRUE(merge_status == "done" || node(m2, "merge")["loaded"].get<bool>()) << merge_status;
  EXPECT_EQ(read_bytes(dir + "/a.glb"), read_bytes(dir + "/b.glb"));
  const auto verify = run_gen3d("cache verify --cache " + cache);
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find(" 0 damaged"), std::string::npos) << verify.output;
}

std::string write_manifest(const std::string& dir, int n) {
  const std::string path = dir + "/manifest.jsonl";
  std::ofstream out(path);
  for (int i = 0; i < n; ++i)
    out << json{{"id", "job" + std::to_string(i)},
                {"mesh", "assets/meshes/BoxTextured.glb"},
                {"source_mesh", "assets/meshes/BoxTextured.glb"},
                {"reunwrap", true},
                {"set", {{"texture_size", 128}, {"render_size", 128}, {"merge.bake_exp", 1 + i}}}}
               // every job its own merge
               .dump()
        << "\n";
  return path;
}

TEST(CacheCommand, ConcurrentShardsShareOneStore) {
  const std::string dir = temp_dir("cache_cli_concurrent");
  const std::string manifest = write_manifest(dir, 8);
  const std::string cache = dir + "/cache";
  std::string gen3d = "'";
  gen3d += gen3d_executable();
  gen3d += "'";
  const auto shard = [&](int i) {
    return "GEN3D_LOG_LEVEL=warn " + gen3d + " batch " + manifest + " --out " + dir + "/out" +
           std::to_string(i) + " --shard " + std::to_string(i) + "/2 --cache " + cache +
           " --cache-all --metrics " + dir + "/m" + std::to_string(i) + ".json";
  };
  const auto r = run_command("cd '" + source_dir() + "' && (" + shard(0) + " & p=$!; " + shard(1) +
                             "; b=$?; wait $p; a=$?; echo \"exit $a $b\")");
  EXPECT_NE(r.output.find("exit 0 0"), std::string::npos) << r.output;
  EXPECT_EQ(read_json(dir + "/m0.json")["done"].get<int>() +
                read_json(dir + "/m1.json")["done"].get<int>(),
            8);
  const auto verify = run_gen3d("cache verify --cache " + cache);
  EXPECT_EQ(verify.exit_code, 0) << verify.output;
  EXPECT_NE(verify.output.find(" 0 damaged"), std::string::npos) << verify.output;
  const auto info = run_gen3d("cache info --cache " + cache);
  EXPECT_EQ(info.exit_code, 0) << info.output;
  EXPECT_EQ(info.output.find("entries: 0\n"), std::string::npos) << info.output;
}

TEST(CacheCommand, BatchJobsSharingAMeshShareItsNodes) {
  const std::string dir = temp_dir("cache_cli_batch");
  const std::string manifest = write_manifest(dir, 3);
  const auto r = run_gen3d("batch " + manifest + " --out " + dir + "/out --jobs 1 --cache " + dir +
                           "/cache --cache-all -q --metrics " + dir + "/m.json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json m = read_json(dir + "/m.json");
  for (const json& job : m["jobs"]) {
    const auto cached = job["cached_nodes"].get<std::vector<std::string>>();
    const bool uv = std::find(cached.begin(), cached.end(), "uv") != cached.end();
    const bool merge = std::find(cached.begin(), cached.end(), "merge") != cached.end();
    EXPECT_FALSE(merge) << job["id"];  // its own bake exponent
    // The first job computes the unwrap; the others load it.
    EXPECT_EQ(uv, job["id"] != "job0") << job.dump();
  }
}

TEST(CacheCommand, InfoClearAndBadBudget) {
  const std::string dir = temp_dir("cache_cli_info");
  const std::string cache = dir + "/cache";
  ASSERT_EQ(texture(cache, dir + "/a.glb", "").exit_code, 0);
  const auto info = run_gen3d("cache info --cache " + cache);
  EXPECT_EQ(info.exit_code, 0) << info.output;
  EXPECT_NE(info.output.find("stage cache: " + cache), std::string::npos) << info.output;
  const auto clear = run_gen3d("cache clear --cache " + cache);
  EXPECT_EQ(clear.exit_code, 0) << clear.output;
  EXPECT_NE(run_gen3d("cache info --cache " + cache).output.find("entries: 0\n"),
            std::string::npos);
  const auto bad = texture(cache, dir + "/b.glb", "--cache-budget lots");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("lots"), std::string::npos) << bad.output;
  EXPECT_FALSE(fs::exists(dir + "/b.glb"));
}

}  // namespace
}  // namespace gen3d::test
