// The strict config reader, config files and sections, the one weight-file rule and the
// process-wide model cache.

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "models/core/error.h"
#include "models/nn/config_reader.h"
#include "models/nn/model_cache.h"
#include "models/nn/weight_files.h"
#include "support/paths.h"

namespace gen3d::models::nn {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ModelError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ConfigReader, ReadsTypedKeysAndTreatsNullAsTheDefault) {
  const json j = json::parse(
      R"({"a": 3, "b": 0.5, "c": true, "d": "x", "e": [1, 2], "f": ["u", "v"], "g": null,
          "h": 4})");
  int a = 0, g = 7;
  double b = 0;
  bool c = false;
  std::string d;
  std::vector<int> e, h;
  std::vector<std::string> f;
  ConfigReader r(j, "cfg");
  r.read("a", a);
  r.read("b", b);
  r.read("c", c);
  r.read("d", d);
  r.read("e", e);
  r.read("f", f);
  r.read("g", g);
  EXPECT_TRUE(r.read_per_level("h", h));
  EXPECT_NO_THROW(r.finish());
  EXPECT_EQ(a, 3);
  EXPECT_EQ(b, 0.5);
  EXPECT_TRUE(c);
  EXPECT_EQ(d, "x");
  EXPECT_EQ(e, (std::vector<int>{1, 2}));
  EXPECT_EQ(f, (std::vector<std::string>{"u", "v"}));
  EXPECT_EQ(g, 7);
  EXPECT_EQ(h, (std::vector<int>{4}));
}

TEST(ConfigReader, ListsEveryProblemInOneError) {
  const json j =
      json::parse(R"({"a": "three", "b": [1, "x"], "mode": "fast", "act": "gelu", "typo": 1})");
  const std::string m = error_of([&] {
    int a = 0;
    std::vector<int> b;
    std::string mode;
    ConfigReader r(j, "net/config.json: Net");
    r.read("a", a);
    r.read("b", b);
    r.read_choice("mode", mode, {"exact", "approx"});
    r.require("act", "silu", "only \"silu\"");
    r.finish();
  });
  EXPECT_EQ(m.rfind("net/config.json: Net:", 0), 0u) << m;
  for (const char* needle :
       {"a: expected an integer, got \"three\"", "b: expected a list",
        "\"fast\" is not supported (supported: exact, approx)",
        "act: \"gelu\" is not supported (only \"silu\")", "unknown key 'typo'"})
    EXPECT_NE(m.find(needle), std::string::npos) << needle << "\n" << m;
}

TEST(ConfigReader, UnknownKeysAreErrorsWarningsOrAccepted) {
  const json j = json::parse(R"({"known": 1, "extra": 2, "skip": 3})");
  auto run = [&](ConfigReader::Unknown u) {
    int k = 0;
    ConfigReader r(j, "cfg");
    r.read("known", k);
    r.ignore({"skip"});
    r.finish(u);
  };
  EXPECT_NE(error_of([&] { run(ConfigReader::Unknown::kError); }).find("extra"), std::string::npos);
  EXPECT_EQ(error_of([&] { run(ConfigReader::Unknown::kWarn); }), "no error");
  EXPECT_EQ(error_of([&] { run(ConfigReader::Unknown::kAccept); }), "no error");
}

TEST(ConfigReader, NullIsAValueWhereItMeansSomethingElse) {
  const json j = json::parse(R"({"mid": null, "opt": null})");
  const std::string m = error_of([&] {
    ConfigReader r(j, "cfg");
    r.require("opt", false, "only false");  // null = the default: fine
    r.require_exactly("mid", "Block", "only \"Block\"");
    r.finish();
  });
  EXPECT_NE(m.find("mid: null is not supported"), std::string::npos) << m;
  EXPECT_EQ(m.find("opt"), std::string::npos) << m;
}

TEST(ConfigFiles, SectionsAndErrorsNameTheFile) {
  const std::string dir = test::temp_dir("nn_config_files");
  std::ofstream(dir + "/c.json") << R"({"model": {"params": {"x": 1}}, "vae": 2})";
  std::ofstream(dir + "/bad.json") << "{nope";
  EXPECT_EQ(read_config_file(dir + "/c.json", "model/params"), json::parse(R"({"x": 1})"));
  EXPECT_EQ(read_config_file(dir + "/c.json").size(), 2u);
  EXPECT_NE(error_of([&] {
              read_config_file(dir + "/c.json", "model/other");
            }).find("no section 'model/other'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_config_file(dir + "/bad.json"); }).find("bad.json"),
            std::string::npos);
  EXPECT_NE(error_of([&] { read_config_file(dir + "/none.json"); }).find("cannot open"),
            std::string::npos);
}

TEST(WeightFiles, FullPrecisionFirstThenHalfThenTorchSaveThenAClearError) {
  const std::string dir = test::temp_dir("nn_weight_files");
  EXPECT_NE(error_of([&] {
              find_weights(dir, "model");
            }).find("no model.safetensors, model.fp16.safetensors, model.bin, model.ckpt or "
                    "model.fp16.ckpt"),
            std::string::npos);
  std::ofstream(dir + "/model.fp16.ckpt") << "pickle";  // Hunyuan3D-2.1's shape checkpoint
  EXPECT_EQ(find_weights(dir, "model"), dir + "/model.fp16.ckpt");
  std::ofstream(dir + "/model.bin") << "pickle";
  EXPECT_EQ(find_weights(dir, "model"), dir + "/model.bin");
  std::ofstream(dir + "/model.fp16.safetensors") << "x";
  EXPECT_EQ(find_weights(dir, "model"), dir + "/model.fp16.safetensors");
  std::ofstream(dir + "/model.safetensors") << "x";
  EXPECT_EQ(find_weights(dir, "model"), dir + "/model.safetensors");
}

struct Thing {
  int value = 0;
};
struct Other {
  int value = 0;
};

TEST(ModelCache, LoadsOncePerKeyAndTypeAndRetriesFailures) {
  clear_shared_models();
  std::atomic<int> loads{0};
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<const Thing>> got(8);
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&, i] {
      got[static_cast<std::size_t>(i)] = shared_model<Thing>("k", [&] {
        ++loads;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return Thing{42};
      });
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(loads.load(), 1);
  for (const auto& g : got) EXPECT_EQ(g.get(), got[0].get());
  // The same key for another type is another model.
  EXPECT_EQ(shared_model<Other>("k", [] { return Other{7}; })->value, 7);
  EXPECT_EQ(shared_model_count(), 2u);

  int attempts = 0;
  auto failing = [&]() -> Thing {
    ++attempts;
    throw ModelError("broken weights");
  };
  EXPECT_THROW(shared_model<Thing>("bad", failing), ModelError);
  EXPECT_THROW(shared_model<Thing>("bad", failing), ModelError);
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(shared_model_count(), 2u);
  clear_shared_models();
  EXPECT_EQ(shared_model_count(), 0u);
}

}  // namespace
}  // namespace gen3d::models::nn
