#pragma once
// The registry of every stage the gen3d executable offers, built once.

#include "pipeline/stage.h"

namespace gen3d::app::cli {

const pipeline::Registry& cli_registry();

}  // namespace gen3d::app::cli
