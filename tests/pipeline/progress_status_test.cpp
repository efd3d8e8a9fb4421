// The status line's text, folded from progress events: nodes finished of all, the clock, the
// running nodes and their unfinished step counters with the time left.

#include "pipeline/progress_status.h"

#include <gtest/gtest.h>

namespace gen3d::pipeline {
namespace {

using progress::Event;
using progress::EventKind;

Event event(EventKind kind, double t, std::string node = {}) {
  Event e;
  e.kind = kind;
  e.t = t;
  e.node = std::move(node);
  return e;
}

Event step(double t, std::string node, std::string label, std::int64_t i, std::int64_t n,
           double eta = -1) {
  Event e = event(EventKind::kStep, t, std::move(node));
  e.label = std::move(label);
  e.i = i;
  e.n = n;
  e.eta_s = eta;
  return e;
}

TEST(ProgressStatus, NamesRunningNodesAndTheirSteps) {
  ProgressStatus s;
  Event start = event(EventKind::kRunStarted, 10.0);
  start.n = 3;
  EXPECT_TRUE(s.add(start));
  EXPECT_TRUE(s.running());
  EXPECT_EQ(s.text(10.0), "[0/3] 0.0 s");
  EXPECT_TRUE(s.add(event(EventKind::kNodeStarted, 10.5, "paint")));
  EXPECT_TRUE(s.add(event(EventKind::kNodeStarted, 10.6, "uv")));
  EXPECT_FALSE(s.add(step(11.0, "paint", "paint step", 0, 50)));
  EXPECT_EQ(s.text(11.0), "[0/3] 1.0 s | paint: paint step 0/50 | uv");
  s.add(step(21.0, "paint", "paint step", 10, 50, 40.0));
  EXPECT_EQ(s.text(21.0), "[0/3] 11.0 s | paint: paint step 10/50 (40.0 s left) | uv");
  // Between events the time left counts down.
  EXPECT_EQ(s.text(31.0), "[0/3] 21.0 s | paint: paint step 10/50 (30.0 s left) | uv");
  // A second counter in one node; a finished counter goes away.
  s.add(step(31.0, "uv", "loading weights", 5, 10));
  s.add(step(32.0, "uv", "chart", 1, 4, 3.0));
  EXPECT_EQ(s.text(32.0),
            "[0/3] 22.0 s | paint: paint step 10/50 (29.0 s left) | uv: loading weights 5/10, "
            "chart 1/4 (3.0 s left)");
  s.add(step(33.0, "uv", "loading weights", 10, 10));
  EXPECT_EQ(s.text(33.0),
            "[0/3] 23.0 s | paint: paint step 10/50 (28.0 s left) | uv: chart 1/4 (2.0 s left)");
  Event done = event(EventKind::kNodeFinished, 34.0, "uv");
  done.status = "done";
  done.i = 1;
  done.n = 3;
  EXPECT_TRUE(s.add(done));
  EXPECT_EQ(s.text(34.0), "[1/3] 24.0 s | paint: paint step 10/50 (27.0 s left)");
  // Steps of a node that is not running are not shown.
  s.add(step(34.5, "uv", "late", 1, 2));
  done.node = "paint";
  done.i = 2;
  s.add(done);
  EXPECT_EQ(s.text(95.0), "[2/3] 1m25s | paint done");
  s.add(event(EventKind::kRunFinished, 96.0));
  EXPECT_FALSE(s.running());
}

TEST(ProgressStatus, StepsOutsideAnyNodeShowUntilTheyFinish) {
  ProgressStatus s;
  s.add(step(0.0, "", "loading weights", 0, 4));
  EXPECT_EQ(s.text(1.0), "[0/0] 1.0 s | ...: loading weights 0/4");
  s.add(step(2.0, "", "loading weights", 4, 4));
  EXPECT_EQ(s.text(2.0), "[0/0] 2.0 s");
}

TEST(ProgressStatus, FormatsDurations) {
  EXPECT_EQ(format_seconds(0.04), "0.0 s");
  EXPECT_EQ(format_seconds(59.9), "59.9 s");
  EXPECT_EQ(format_seconds(60.0), "1m00s");
  EXPECT_EQ(format_seconds(125.4), "2m05s");
  EXPECT_EQ(format_seconds(3725.0), "1h02m");
}

}  // namespace
}  // namespace gen3d::pipeline
