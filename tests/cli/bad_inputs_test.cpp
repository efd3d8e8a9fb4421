// The bad-input corpus (tests/data/bad/cases.json): every case through the CLI must exit with its
// expected code and message, never crash or hang, and leave no file behind.

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
  return s;
}

TEST(BadInputs, EveryCaseFailsCleanlyWithItsMessage) {
  const std::string bad = data_dir() + "/bad";
  std::ifstream in(env_or("GEN3D_BAD_CASES", bad + "/cases.json"));
  ASSERT_TRUE(in) << "no cases file";
  const auto doc = nlohmann::json::parse(in);
  ASSERT_GE(doc["cases"].size(), 40u);
  int index = 0;
  for (const auto& c : doc["cases"]) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const std::string tmp = temp_dir("bad_inputs/" + std::to_string(index++));
    const std::string args = replace_all(replace_all(c["args"], "{bad}", bad), "{tmp}", tmp);
    // `timeout` turns a hang into exit 124; a crash shows as 128 + signal.
    const auto r = run_gen3d("-q " + args + " </dev/null");
    const int want = c["exit"];
    EXPECT_EQ(r.exit_code, want) << "gen3d " << args << "\n" << r.output;
    EXPECT_LT(r.exit_code, 124) << "hang or crash: gen3d " << args;
    const std::string fragment = c["message"];
    EXPECT_NE(r.output.find(fragment), std::string::npos)
        << "message lacks \"" << fragment << "\": " << r.output;
    for (const auto& e : fs::recursive_directory_iterator(tmp))
      ADD_FAILURE() << "left behind: " << e.path();
  }
}

}  // namespace
}  // namespace gen3d::test
