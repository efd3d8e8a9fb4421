#pragma once
// The JSON form of a progress event: one object per event, as `--progress json` prints them one
// a line and a server would send them as server-sent events.
//
//   {"event":"run_started","t":0.01,"pipeline":"texgen","nodes":21}
//   {"event":"node_started","t":0.02,"node":"paint","stage":"views_from_model"}
//   {"event":"step","t":1.23,"node":"paint","label":"paint step","i":3,"n":50,"eta_s":12.0}
//   {"event":"node_finished","t":9.1,"node":"paint","stage":"views_from_model","status":"done",
//    "seconds":9.08,"finished":5,"total":21}
//   {"event":"warning","t":0.2,"node":"uv","message":"..."}   (also "error", and "log" + "level")
//   {"event":"run_finished","t":9.5,"pipeline":"texgen","status":"ok","seconds":9.49}
//
// "run" names the job where there are several (a batch); "node" is absent outside any node;
// "eta_s" is absent until a step's duration is known; "message" on a failed node is its cause.

#include <nlohmann/json.hpp>

#include "progress/progress.h"

namespace gen3d::pipeline {

nlohmann::ordered_json progress_event_json(const progress::Event& e);

}  // namespace gen3d::pipeline
