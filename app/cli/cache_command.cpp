#include "app/cli/cache_command.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "app/cli/registry.h"
#include "pipeline/error.h"
#include "pipeline/stage_cache.h"

namespace gen3d::app::cli {

using namespace gen3d::pipeline;

void add_cache_options(CLI::App* cmd, CacheOptions& o, bool plain_name) {
  cmd->add_option(plain_name ? "--cache,--cache-dir" : "--cache-dir", o.dir,
                  "stage cache directory: unchanged nodes are loaded instead of run (default: "
                  "$GEN3D_CACHE_DIR, else $XDG_CACHE_HOME/gen3d or ~/.cache/gen3d)");
  cmd->add_flag("--no-cache", o.off, "run every node; read and write no stage cache");
  cmd->add_option("--cache-budget", o.budget,
                  "stage cache size limit, e.g. 512M or 20G (least recently used entries go "
                  "first; default 20G)");
  cmd->add_flag("--cache-all", o.store_all,
                "store every cacheable node, also those cheaper to recompute than to load");
}

namespace {

StageCacheOptions store_options(const CacheOptions& o) {
  StageCacheOptions so;
  so.dir = o.dir.empty() ? default_cache_dir() : o.dir;
  if (!o.budget.empty()) so.budget_bytes = parse_byte_size(o.budget);
  if (o.store_all) {
    so.min_store_ms = 0;
    so.store_factor = 0;
  }
  return so;
}

bool disabled_by_environment() {
  const char* env = std::getenv("GEN3D_CACHE_DIR");
  return env && std::strcmp(env, "off") == 0;
}

}  // namespace

std::unique_ptr<StageCache> open_stage_cache(const CacheOptions& o) {
  if (o.off || (o.dir.empty() && disabled_by_environment())) return nullptr;
  const StageCacheOptions so = store_options(o);  // a bad --cache-budget is a usage error
  try {
    auto cache = std::make_unique<StageCache>(so, cli_registry());
    spdlog::debug("stage cache: {}", so.dir);
    return cache;
  } catch (const std::exception& e) {
    spdlog::warn("{}; running without it", e.what());
    return nullptr;
  }
}

CLI::App* add_cache_command(CLI::App& app, CacheCommand& c) {
  auto* cmd = app.add_subcommand("cache", "Inspect or empty the stage cache");
  cmd->require_subcommand(1);
  c.info = cmd->add_subcommand("info", "Where the stage cache is, its entries and their size");
  c.clear = cmd->add_subcommand("clear", "Delete every stage cache entry");
  c.verify = cmd->add_subcommand(
      "verify", "Check every entry's header and checksum; delete the damaged ones (exit 1)");
  for (CLI::App* sub : {c.info, c.clear, c.verify}) {
    sub->add_option("--cache,--cache-dir", c.cache.dir, "stage cache directory");
    sub->add_option("--cache-budget", c.cache.budget, "size limit to report against");
  }
  return cmd;
}

int cmd_cache(const CacheCommand& c) {
  if (c.cache.dir.empty() && disabled_by_environment())
    throw ConfigError("GEN3D_CACHE_DIR=off: no stage cache to inspect (name one with --cache DIR)");
  StageCache cache(store_options(c.cache), cli_registry());
  if (c.clear && *c.clear) {
    const CacheInfo before = cache.info();
    cache.clear();
    fmt::print("cleared {}: {} entries, {:.1f} MiB\n", before.dir, before.entries,
               static_cast<double>(before.bytes) / (1 << 20));
    return 0;
  }
  if (c.verify && *c.verify) {
    const auto [good, bad] = cache.verify();
    fmt::print("{}: {} entries verified, {} damaged (deleted)\n", cache.options().dir, good, bad);
    return bad == 0 ? 0 : 1;
  }
  const CacheInfo info = cache.info();
  fmt::print(
      "stage cache: {}\nentries: {}\nsize: {:.1f} MiB of {:.1f} MiB budget\nfile hashes: {}\n",
      info.dir, info.entries, static_cast<double>(info.bytes) / (1 << 20),
      static_cast<double>(info.budget_bytes) / (1 << 20), info.file_hashes);
  return 0;
}

}  // namespace gen3d::app::cli
