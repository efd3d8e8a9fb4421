// The JSON form of progress events (what `--progress json` prints, one per line).

#include "pipeline/progress_json.h"

#include <gtest/gtest.h>

namespace gen3d::pipeline {
namespace {

using progress::Event;
using progress::EventKind;
using progress::Level;

TEST(ProgressJson, EveryKindHasItsFields) {
  Event e;
  e.kind = EventKind::kStep;
  e.t = 1.2345678;
  e.node = "denoise";
  e.label = "denoise step";
  e.i = 3;
  e.n = 50;
  e.eta_s = 12.0;
  EXPECT_EQ(progress_event_json(e).dump(),
            R"({"event":"step","t":1.234568,"node":"denoise","label":"denoise step","i":3,)"
            R"("n":50,"eta_s":12.0})");
  e.eta_s = -1;  // not known yet: absent
  e.i = 0;
  EXPECT_FALSE(progress_event_json(e).contains("eta_s"));

  Event f;
  f.kind = EventKind::kNodeFinished;
  f.t = 2;
  f.run = "job1";
  f.node = "paint";
  f.stage = "views_from_model";
  f.status = "failed";
  f.seconds = 0.5;
  f.i = 4;
  f.n = 21;
  f.message = "boom";
  EXPECT_EQ(progress_event_json(f).dump(),
            R"({"event":"node_finished","t":2.0,"run":"job1","node":"paint",)"
            R"("stage":"views_from_model","status":"failed","seconds":0.5,"finished":4,)"
            R"("total":21,"message":"boom"})");

  Event s;
  s.kind = EventKind::kNodeStarted;
  s.node = "uv";
  s.stage = "uv_unwrap";
  EXPECT_EQ(progress_event_json(s).dump(),
            R"({"event":"node_started","t":0.0,"node":"uv","stage":"uv_unwrap"})");

  Event r;
  r.kind = EventKind::kRunStarted;
  r.stage = "texgen";
  r.n = 17;
  EXPECT_EQ(progress_event_json(r).dump(),
            R"({"event":"run_started","t":0.0,"pipeline":"texgen","nodes":17})");
  r.kind = EventKind::kRunFinished;
  r.status = "ok";
  r.seconds = 3.25;
  EXPECT_EQ(progress_event_json(r).dump(),
            R"({"event":"run_finished","t":0.0,"pipeline":"texgen","status":"ok","seconds":3.25})");
}

TEST(ProgressJson, LogMessagesAreWarningsErrorsOrLogLines) {
  Event e;
  e.kind = EventKind::kLog;
  e.level = Level::kWarning;
  e.node = "uv";
  e.message = "uv: unwrapping anew";
  EXPECT_EQ(progress_event_json(e).dump(),
            R"({"event":"warning","t":0.0,"node":"uv","message":"uv: unwrapping anew"})");
  e.level = Level::kError;
  EXPECT_EQ(progress_event_json(e)["event"], "error");
  e.level = Level::kInfo;
  e.node.clear();
  EXPECT_EQ(progress_event_json(e).dump(),
            R"({"event":"log","t":0.0,"level":"info","message":"uv: unwrapping anew"})");
}

}  // namespace
}  // namespace gen3d::pipeline
