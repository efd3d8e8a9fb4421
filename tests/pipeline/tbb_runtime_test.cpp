// Which oneTBB the test process runs on. In the `tsan` preset every binary must load the
// ThreadSanitizer-built oneTBB (GEN3D_TSAN_TBB_DIR), also for OpenCV, whose parallel loops run on
// the same libtbb: one copy of the library in the process, the instrumented one. Work handed
// between TBB threads must then need no suppression: a parallel_for and a two-node flow graph
// write plain memory that the waiting thread reads afterwards.

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/parallel_for.h>
#include <opencv2/core.hpp>

namespace gen3d::pipeline {
namespace {

// Paths of the shared libraries mapped into this process whose file name starts with `name`.
std::set<std::string> mapped(const std::string& name) {
  std::set<std::string> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string file = path.substr(path.rfind('/') + 1);
    if (file.rfind(name, 0) == 0) out.insert(path);
  }
  return out;
}

TEST(TbbRuntime, OneLibtbbInTheProcessAndTheInstrumentedOneUnderTsan) {
  // OpenCV's own parallel loop, so that its libtbb dependency is surely loaded and used.
  cv::parallel_for_(cv::Range(0, 4), [&](const cv::Range&) {});
  const auto libs = mapped("libtbb.so");
  ASSERT_EQ(libs.size(), 1u) << "more than one libtbb in the process";
#ifdef GEN3D_TSAN_TBB_DIR
  EXPECT_EQ(libs.begin()->rfind(GEN3D_TSAN_TBB_DIR, 0), 0u)
      << "the tsan build runs on " << *libs.begin() << ", not the ThreadSanitizer-built oneTBB in "
      << GEN3D_TSAN_TBB_DIR;
#endif
}

TEST(TbbRuntime, ResultsHandedAcrossTaskBoundariesAreOrdered) {
  std::vector<double> values(1 << 14, 0.0);
  tbb::parallel_for(size_t(0), values.size(), [&](size_t i) { values[i] = double(i) * 0.5; });
  double sum = 0;
  for (double v : values) sum += v;
  EXPECT_DOUBLE_EQ(sum, 0.5 * double(values.size()) * double(values.size() - 1) / 2);

  std::vector<int> produced;
  int consumed = 0;
  tbb::flow::graph g;
  tbb::flow::function_node<int, int> produce(g, 1, [&](int n) {
    produced.assign(size_t(n), 3);
    return n;
  });
  tbb::flow::function_node<int, int> consume(g, 1, [&](int n) {
    for (int i = 0; i < n; ++i) consumed += produced[size_t(i)];
    return n;
  });
  tbb::flow::make_edge(produce, consume);
  produce.try_put(1000);
  g.wait_for_all();
  EXPECT_EQ(consumed, 3000);
}

}  // namespace
}  // namespace gen3d::pipeline
