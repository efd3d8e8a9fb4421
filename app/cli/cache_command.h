#pragma once
// The stage cache on the command line: --cache DIR / --no-cache / --cache-budget on the commands
// that run pipelines, and `gen3d cache info|clear`.

#include <memory>
#include <string>

namespace CLI {
class App;
}

namespace gen3d::pipeline {
class StageCache;
}

namespace gen3d::app::cli {

struct CacheOptions {
  std::string dir;     // --cache DIR ("": $GEN3D_CACHE_DIR, $XDG_CACHE_HOME/gen3d, ~/.cache/gen3d)
  bool off = false;    // --no-cache (also GEN3D_CACHE_DIR=off)
  std::string budget;  // --cache-budget: "20G", "512M", bytes ("": 20 GiB)
  bool store_all = false;  // --cache-all: store every cacheable node, however cheap
};

// Adds --cache DIR (or, where --cache means something else, only --cache-dir), --cache-dir,
// --no-cache and --cache-budget to `cmd`.
void add_cache_options(CLI::App* cmd, CacheOptions& options, bool plain_name = true);

// The store `options` name, or null when caching is off. A store that cannot be opened is a
// warning and no cache, never an error.
std::unique_ptr<pipeline::StageCache> open_stage_cache(const CacheOptions& options);

// `gen3d cache info|clear|verify [--cache DIR]`: adds the subcommand group; returns it.
struct CacheCommand {
  CacheOptions cache;
  CLI::App* info = nullptr;
  CLI::App* clear = nullptr;
  CLI::App* verify = nullptr;
};
CLI::App* add_cache_command(CLI::App& app, CacheCommand& command);
int cmd_cache(const CacheCommand& command);

}  // namespace gen3d::app::cli
