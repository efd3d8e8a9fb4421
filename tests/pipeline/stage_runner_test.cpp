// StageRunner: one stage, alone, with params checked as a config would check them.

#include <gtest/gtest.h>

#include "pipeline/error.h"
#include "pipeline/stage_runner.h"
#include "test_stages.h"

namespace gen3d::test {
namespace {

TEST(StageRunner, RunsOneStageWithInputsAndDefaults) {
  pipeline::StageRunner runner(*test_registry().find("test_add"));
  runner.input("a", Number{2}).input("b", Number{40});
  runner.run();
  ASSERT_TRUE(runner.output<Number>("sum"));
  EXPECT_EQ(runner.output<Number>("sum")->value, 42);
}

TEST(StageRunner, ChecksParamsLikeAConfig) {
  pipeline::StageRunner runner(*test_registry().find("test_params"));
  EXPECT_THROW(runner.param("size", "2k"), pipeline::ConfigError);
  EXPECT_THROW(runner.param("nope", 1), pipeline::ConfigError);
  EXPECT_THROW(runner.run(), pipeline::ConfigError) << "required \"path\" is missing";
  runner.param("path", "x").param("size", 128).param("scale", 0.5);
  runner.run();
  EXPECT_EQ(runner.output<Number>("out")->value, 64);
}

TEST(StageRunner, StageExceptionsPropagate) {
  pipeline::StageRunner runner(*test_registry().find("test_fail"));
  runner.param("message", "nope");
  EXPECT_THROW(runner.run(), std::runtime_error);
}

}  // namespace
}  // namespace gen3d::test
