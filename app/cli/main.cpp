// gen3d: run, validate and inspect 3D generation pipelines.

#include <csignal>
#include <string_view>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "app/cli/batch_command.h"
#include "app/cli/bench_dit.h"
#include "app/cli/bench_paint.h"
#include "app/cli/bench_shape.h"
#include "app/cli/bench_single_image.h"
#include "app/cli/cache_study.h"
#include "app/cli/check_models.h"
#include "app/cli/commands.h"
#include "app/cli/device_option.h"
#include "app/cli/progress_display.h"
#include "app/cli/shape_command.h"
#include "app/server/serve_command.h"
#include "pipeline/error.h"

namespace {

extern "C" void on_sigint(int) {
  gen3d::app::cli::interrupt_flag().store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

// Whether this command line may run a network, and so needs oneDNN's OpenMP threads to sleep
// between calls (bench_dit.h). The first word that is not an option names the command; `texture`
// runs networks only with --models. The others skip the re-execution it costs (about 0.1 s).
bool may_run_networks(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view word = argv[i];
    if (word == "--progress") ++i;  // its value is no command
    if (word.starts_with('-')) continue;
    if (word == "texture" || word == "serve") {
      for (int j = i + 1; j < argc; ++j)
        if (std::string_view(argv[j]).starts_with("--models")) return true;
      return false;
    }
    return word == "run" || word == "shape" || word == "batch" || word == "bench" ||
           word == "cache-study";
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (may_run_networks(argc, argv)) gen3d::app::cli::passive_omp_wait(argv);
  gen3d::app::cli::register_devices();
  CLI::App app{"gen3d: native 3D generation pipelines (texgen, shapegen) on a oneTBB flow graph"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gen3d ") + GEN3D_VERSION);
  int verbosity = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbosity,
               "more logging (-vv for trace); GEN3D_LOG_LEVEL overrides");
  app.add_flag("-q,--quiet", quiet, "warnings and errors only, no summary table");
  std::string progress = "auto";
  app.add_option("--progress", progress,
                 "progress display: auto (a status line with the running nodes, step i/N and "
                 "time left, when stderr is a terminal), none, or json (one JSON event per line "
                 "on stderr: node_started, step, node_finished, warning, ...)")
      ->check(CLI::IsMember({"auto", "none", "json"}))
      ->capture_default_str();
  app.fallthrough();

  gen3d::app::cli::RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "Validate and run a pipeline config");
  run_cmd->add_option("config", run.config, "pipeline JSON file")->required();
  run_cmd->add_option("--set", run.sets, "override: var=value or node.param=value (repeatable)");
  run_cmd->add_option("--trace", run.trace_path, "write a Chrome trace (open in Perfetto UI)");
  run_cmd->add_option("--metrics", run.metrics_path, "write run metrics as JSON");
  std::string run_precision;
  run_cmd
      ->add_option("--precision", run_precision,
                   "sets the config's `precision` variable (the shipped model configs pass it to "
                   "every network): auto, fp32, bf16 or int8 (the shape pipelines only)")
      ->check(CLI::IsMember({"auto", "fp32", "bf16", "int8"}));
  run_cmd->add_option("-j,--threads", run.threads, "worker threads (default: all cores)")
      ->check(CLI::Range(1, 1024));
  run_cmd
      ->add_option("--model-concurrency", run.model_concurrency,
                   "model-class stages allowed to run at once")
      ->check(CLI::Range(1, 64));
  gen3d::app::cli::add_cache_options(run_cmd, run.cache);

  gen3d::app::cli::TextureOptions tex;
  auto* texture_cmd = app.add_subcommand(
      "texture", "Texture a mesh: unwrap, render 6 views, bake, merge, inpaint, save a GLB");
  texture_cmd->add_option("--mesh", tex.mesh, "mesh to texture (OBJ, GLB, PLY, FBX, ...)")
      ->required();
  texture_cmd->add_option("--image", tex.images,
                          "reference image for the front view; VIEW=PATH for another view "
                          "(front, right, back, left, top, bottom or an index); repeatable");
  texture_cmd->add_option("--views", tex.views_dir, "directory with one image per view, by name");
  texture_cmd->add_option("--mr-views", tex.mr_views_dir,
                          "with --views: directory with one metallic-roughness image per view "
                          "(metallic in R, roughness in G), by name; makes a PBR material");
  texture_cmd->add_option("--source-mesh", tex.source_mesh,
                          "textured mesh whose albedo views are baked (texture transfer)");
  texture_cmd->add_option("-o,--output", tex.output, "output mesh (.glb, .obj)")
      ->capture_default_str();
  texture_cmd->add_option("--texture-size", tex.texture_size, "texture size (default 2048)")
      ->check(CLI::Range(64, 16384));
  texture_cmd->add_option("--render-size", tex.render_size, "view render size (default 2048)")
      ->check(CLI::Range(64, 16384));
  texture_cmd->add_option("--faces", tex.faces, "simplify to this many faces first (0: keep)")
      ->check(CLI::NonNegativeNumber);
  texture_cmd->add_flag("--reunwrap", tex.reunwrap,
                        "unwrap anew even when the mesh has UVs (default: keep them)");
  texture_cmd->add_option(
      "--models", tex.models_dir,
      "model folder: Hunyuan3D-2.1 (hunyuan3d-paintpbr-v2-1/, dinov2-giant/, "
      "RealESRGAN_x4plus.pth: PBR textures) or Hunyuan3D-2 (hunyuan3d-paint-v2-0[-turbo]/, "
      "hunyuan3d-delight-v2-0/): multiview diffusion from the --image reference");
  texture_cmd
      ->add_option("--paint-version", tex.paint_version,
                   "with --models holding both: 2.1 (PBR, the default) or 2.0")
      ->check(CLI::IsMember({"2.0", "2.1"}));
  texture_cmd
      ->add_option("--precision", tex.precision,
                   "network precision: auto (bf16 where the CPU has AVX512-BF16 or AMX, else "
                   "fp32), fp32 or bf16")
      ->check(CLI::IsMember({"auto", "fp32", "bf16"}));
  texture_cmd
      ->add_option("--device", tex.device,
                   "with --models: where the networks run: cpu (default), or cuda (bf16 on a GPU; "
                   "a gen3d built with the CUDA backend; Real-ESRGAN stays on the CPU)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  texture_cmd->add_flag("--turbo", tex.turbo,
                        "with --models: the turbo paint model (LCM, 10 steps, no guidance)");
  texture_cmd->add_option("--set", tex.run.sets, "override: var=value or node.param=value");
  texture_cmd->add_option("--trace", tex.run.trace_path, "write a Chrome trace");
  texture_cmd->add_option("--metrics", tex.run.metrics_path, "write run metrics as JSON");
  texture_cmd->add_option("--report", tex.report_path, "write a self-contained HTML report");
  texture_cmd->add_option("-j,--threads", tex.run.threads, "worker threads (default: all cores)")
      ->check(CLI::Range(1, 1024));
  texture_cmd->add_flag("--dump", tex.dump, "print the pipeline config it would run, and stop");
  gen3d::app::cli::add_cache_options(texture_cmd, tex.run.cache);

  gen3d::app::cli::ShapeOptions shape;
  std::vector<std::string> shape_images;  // --image items: sorted by set_shape_images
  auto* shape_cmd = app.add_subcommand(
      "shape",
      "Generate a mesh from an image (--image), named views for a multiview model (--image "
      "front=A.png --image left=B.png ...) or condition tokens (--cond): DiT sampling, ShapeVAE "
      "decode, volume decoding, marching cubes");
  shape_cmd->add_option("--config", shape.config,
                        std::string("pipeline to adapt (default: ") +
                            gen3d::app::cli::kShapeCondConfig + ", with --image " +
                            gen3d::app::cli::kShapeImageConfig + ", with named views " +
                            gen3d::app::cli::kShapeMultiviewConfig + ")");
  shape_cmd->add_option("--image", shape_images,
                        "reference image (RGBA, or RGB on a plain background); for a multiview "
                        "model (mv, mv-fast, mv-turbo) VIEW=PATH, repeated, with VIEW front, "
                        "left, back or right (any subset); not with --cond");
  shape_cmd->add_option("--cond", shape.cond, "condition tokens (.safetensors); not with --image");
  shape_cmd->add_option("--cond-name", shape.cond_name, "tensor name of the condition tokens");
  shape_cmd->add_option("--models", shape.models,
                        "folder of published model folders (e.g. a download of tencent/"
                        "Hunyuan3D-2); --model then names one");
  shape_cmd->add_option("--model", shape.model,
                        "DiT weights (file or official model folder), or with --models a short "
                        "name (2.0, fast, turbo, 2.1, mini, mini-fast, mini-turbo, mv, mv-fast, "
                        "mv-turbo) or a folder name; a combined checkpoint also gives the VAE "
                        "and, with --image, the conditioner");
  shape_cmd->add_option("--vae", shape.vae,
                        "ShapeVAE weights (file or official model folder; default: --model's "
                        "vae.* weights when it has them)");
  shape_cmd->add_option("--conditioner", shape.conditioner,
                        "DINOv2 conditioner weights for --image (default: --model's "
                        "conditioner.* weights)");
  shape_cmd->add_option(
      "--conditioner-config", shape.conditioner_config,
      "conditioner config, YAML or JSON (default: config.json or config.yaml next to its weights)");
  shape_cmd->add_option("--conditioner-section", shape.conditioner_section,
                        "'/'-separated path of the conditioner block in that config (default: "
                        "\"conditioner\" when present, else the whole file)");
  shape_cmd->add_option("-o,--output", shape.output, "output mesh (.glb, .obj, .ply)");
  shape_cmd->add_option("--method", shape.method, "volume decoder: dense, hierarchical, flashvdm");
  shape_cmd->add_option("--cache", shape.cache, "step cache: none, fbcache, teacache, taylorseer");
  shape_cmd
      ->add_option("--precision", shape.precision,
                   "network precision: auto (bf16 where the CPU has AVX512-BF16 or AMX, else "
                   "fp32), fp32, bf16, or int8 (the attention and MLP products of the DiT, the "
                   "ShapeVAE and DINOv2 W8A8, the rest bf16)")
      ->check(CLI::IsMember({"auto", "fp32", "bf16", "int8"}));
  shape_cmd
      ->add_option("--device", shape.device,
                   "where the networks run: cpu (default), or cuda (bf16 on a GPU; a gen3d built "
                   "with the CUDA backend)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  shape_cmd->add_option("--steps", shape.steps, "denoising steps");
  shape_cmd->add_option("--guidance", shape.guidance, "classifier-free guidance scale");
  shape_cmd->add_option("--seed", shape.seed, "noise seed");
  shape_cmd->add_option("--latent-tokens", shape.latent_tokens, "latent tokens (VAE num_latents)");
  shape_cmd->add_option("--resolution", shape.resolution, "octree resolution R (cells per axis)");
  shape_cmd->add_option("--min-resolution", shape.min_resolution, "coarsest decoding level");
  shape_cmd->add_option("--num-chunks", shape.num_chunks, "points per decoder call");
  shape_cmd->add_option("--max-faces", shape.max_faces, "face reduction target (0: off)");
  shape_cmd->add_option("--set", shape.run.sets, "override: var=value or node.param=value");
  shape_cmd->add_option("--trace", shape.run.trace_path, "write a Chrome trace");
  shape_cmd->add_option("--metrics", shape.run.metrics_path, "write run metrics as JSON");
  shape_cmd->add_option("-j,--threads", shape.run.threads, "worker threads (default: all cores)")
      ->check(CLI::Range(1, 1024));
  shape_cmd->add_flag("--dump", shape.dump, "print the pipeline config it would run, and stop");
  gen3d::app::cli::add_cache_options(shape_cmd, shape.run.cache,
                                     false);  // --cache is the step cache

  gen3d::app::cli::BatchOptions batch;
  std::string shard;
  auto* batch_cmd = app.add_subcommand(
      "batch", "Run one job per manifest line; failures are recorded and the rest go on");
  batch_cmd
      ->add_option("manifest", batch.manifest,
                   "JSON lines: {\"id\", \"mesh\", \"image\"|\"views\"|\"source_mesh\", "
                   "\"set\": {...}}")
      ->required();
  batch_cmd->add_option("--pipeline", batch.pipeline,
                        "config to run per job (default: the texgen pipeline); job fields set its "
                        "variables");
  batch_cmd->add_option("--out", batch.out_dir, "output directory (<id>.glb + <id>.done)")
      ->capture_default_str();
  batch_cmd->add_option("--jobs", batch.jobs, "jobs run at once")->check(CLI::Range(1, 256));
  batch_cmd->add_option("--shard", shard,
                        "I/N: run only the jobs whose id hashes to I modulo N (0 <= I < N)");
  batch_cmd->add_flag("--resume", batch.resume, "skip jobs that completed in an earlier run");
  batch_cmd->add_option("--metrics", batch.metrics_path, "write a JSON summary of the batch");
  batch_cmd->add_option("-j,--threads", batch.threads, "worker threads for the whole process")
      ->check(CLI::Range(1, 1024));
  gen3d::app::cli::add_cache_options(batch_cmd, batch.cache);
  gen3d::app::cli::CacheCommand cache_cmd;
  gen3d::app::cli::add_cache_command(app, cache_cmd);

  gen3d::app::cli::CacheStudyOptions study;
  auto* study_cmd = app.add_subcommand(
      "cache-study",
      "Compare step caches (none/FBCache/TeaCache/TaylorSeer) on one model, condition and seed");
  study_cmd->add_option("--model", study.model,
                        "DiT weights: .safetensors file or model directory");
  study_cmd->add_option(
      "--config", study.config,
      "model config, YAML or JSON (default: config.json or config.yaml next to the weights)");
  study_cmd
      ->add_option("--random-config", study.random_config,
                   "random DiT instead of weights: mid or small")
      ->check(CLI::IsMember({"mid", "small"}));
  study_cmd->add_option("--cond", study.cond,
                        "condition tokens (.safetensors), [B, Lc, C] or [Lc, C]");
  study_cmd->add_option("--cond-name", study.cond_name, "tensor name inside --cond");
  study_cmd->add_option("--steps", study.steps, "denoising steps")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  study_cmd->add_option("--guidance", study.guidance, "CFG scale")->capture_default_str();
  study_cmd->add_option("--seed", study.seed, "noise seed")->capture_default_str();
  study_cmd->add_option("--latent-tokens", study.latent_tokens,
                        "latent tokens L (default 3072, or the preset's)");
  study_cmd->add_option("--repeats", study.repeats, "timing rounds (best kept)")
      ->check(CLI::Range(1, 100));
  study_cmd->add_option("--method", study.methods,
                        "fbcache, teacache, taylorseer or all (repeatable)");
  study_cmd->add_option("--json", study.json_path, "also write the rows as JSON");
  study_cmd->add_option("--set", study.run.sets, "override: var=value or node.param=value");
  study_cmd->add_option("--trace", study.run.trace_path, "write a Chrome trace");
  study_cmd->add_option("--metrics", study.run.metrics_path, "write run metrics as JSON");
  study_cmd->add_option("-j,--threads", study.run.threads, "worker threads")
      ->check(CLI::Range(1, 1024));

  gen3d::app::cli::CheckModelsOptions models_check;
  auto* models_cmd = app.add_subcommand("models", "Inspect model folders and weight files");
  models_cmd->require_subcommand(1);
  auto* check_cmd = models_cmd->add_subcommand(
      "check",
      "Which official networks a folder holds (files, dtypes, parameters, memory per precision, "
      "missing or mis-shaped tensors), or every tensor of one .safetensors/.bin file; runs "
      "nothing; exits 1 when the folder has problems");
  check_cmd->add_option("path", models_check.path, "model folder or weights file")->required();
  check_cmd->add_flag("--json", models_check.json, "a weights file: one JSON object per tensor");
  check_cmd->add_option("--set", models_check.run.sets, "override: var=value or node.param=value");

  auto* bench_cmd =
      app.add_subcommand("bench", "Benchmarks of the runtime's pieces, as JSON lines");
  bench_cmd->require_subcommand(1);
  gen3d::app::cli::BenchDitOptions bench_dit;
  gen3d::app::cli::add_bench_dit(*bench_cmd, bench_dit);
  gen3d::app::cli::BenchShapeOptions bench_shape;
  gen3d::app::cli::add_bench_shape(*bench_cmd, bench_shape);
  gen3d::app::cli::BenchPaintOptions bench_paint;
  gen3d::app::cli::add_bench_paint(*bench_cmd, bench_paint);
  gen3d::app::cli::BenchSingleImageOptions bench_single;
  gen3d::app::cli::add_bench_single_image(*bench_cmd, bench_single);

  gen3d::app::server::ServeOptions serve;
  auto* serve_cmd = app.add_subcommand(
      "serve", "HTTP server: the Hunyuan3D-2 api_server protocol and gen3d's job API");
  serve_cmd->add_option("--host", serve.host, "address to listen on (loopback by default)")
      ->capture_default_str();
  serve_cmd->add_option("--port", serve.port, "port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  serve_cmd->add_option(
      "--models", serve.models_dir,
      "model folder (Hunyuan3D-2 layout): make shapes with its shape model, texture with its "
      "paint model");
  serve_cmd->add_option("--jobs", serve.jobs, "jobs run at once")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  serve_cmd->add_option("--queue", serve.queue, "jobs that may wait; past that: 429")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  serve_cmd->add_option("--max-body", serve.max_body, "largest request body (e.g. 64M)")
      ->capture_default_str();
  serve_cmd->add_option("--data", serve.data_dir,
                        "folder for the jobs' files (default: a folder in the temp directory)");
  serve_cmd->add_option("--token", serve.token,
                        "require \"Authorization: Bearer TOKEN\" on every request");
  serve_cmd->add_flag("--insecure", serve.insecure, "allow a non-loopback --host without --token");
  serve_cmd->add_option("--texture-size", serve.texture_size, "texture size of texture jobs")
      ->check(CLI::Range(64, 16384));
  serve_cmd->add_option("--render-size", serve.render_size, "view render size of texture jobs")
      ->check(CLI::Range(64, 16384));
  serve_cmd
      ->add_option("--grace", serve.grace,
                   "on SIGTERM, time running jobs get to finish before they are cancelled "
                   "(e.g. 30s, 2m, 0)")
      ->capture_default_str();
  serve_cmd
      ->add_option("--job-nice", serve.job_nice,
                   "nice value of the jobs' threads, so that requests are answered first under "
                   "load (0: the server's own)")
      ->check(CLI::Range(0, 19))
      ->capture_default_str();
  // One stage cache for every job of the server, the command line's by default.
  gen3d::app::cli::add_cache_options(serve_cmd, serve.cache);

  std::string config;
  std::vector<std::string> sets;
  bool dump = false;
  auto* validate_cmd = app.add_subcommand(
      "validate", "Check a pipeline config against every stage contract without running it");
  validate_cmd->add_option("config", config, "pipeline JSON file")->required();
  validate_cmd->add_option("--set", sets, "override: var=value or node.param=value (repeatable)");
  validate_cmd->add_flag("--dump", dump, "print the effective config after overrides");

  bool as_json = false;
  bool as_markdown = false;
  auto* stages_cmd = app.add_subcommand("stages", "List every stage with its ports and parameters");
  auto* json_flag = stages_cmd->add_flag("--json", as_json, "machine-readable output");
  stages_cmd
      ->add_flag("--markdown", as_markdown,
                 "one Markdown page (docs/stages.md is this output: build/gen3d stages --markdown "
                 "> docs/stages.md)")
      ->excludes(json_flag);

  auto* schema_cmd = app.add_subcommand(
      "schema", "Print a JSON Schema for pipeline files (for editor completion)");

  auto* graph_cmd = app.add_subcommand("graph", "Print a pipeline as a Graphviz dot graph");
  graph_cmd->add_option("config", config, "pipeline JSON file")->required();
  graph_cmd->add_option("--set", sets, "override: var=value or node.param=value (repeatable)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  const gen3d::app::cli::ProgressOutput output(gen3d::app::cli::parse_progress_mode(progress),
                                               quiet, verbosity);
  // With JSON events on stderr the tables and status lines stay off it.
  if (output.json()) quiet = true;
  run.quiet = quiet;
  if (!run_precision.empty()) run.sets.push_back("precision=" + run_precision);
  tex.run.quiet = quiet;
  shape.run.quiet = quiet;
  batch.quiet = quiet;
  study.run.quiet = quiet;
  models_check.run.quiet = quiet;
  std::signal(SIGINT, on_sigint);

  try {
    if (*run_cmd) return gen3d::app::cli::cmd_run(run);
    if (*texture_cmd) return gen3d::app::cli::cmd_texture(tex);
    if (*serve_cmd) return gen3d::app::server::cmd_serve(serve);
    if (*shape_cmd) {
      if (const std::string problem = gen3d::app::cli::set_shape_images(shape_images, shape);
          !problem.empty()) {
        spdlog::error("shape: {}", problem);
        return 2;
      }
      return gen3d::app::cli::cmd_shape(shape);
    }
    if (*study_cmd) return gen3d::app::cli::cmd_cache_study(study);
    if (*check_cmd) return gen3d::app::cli::cmd_check_models(models_check);
    if (*bench_dit.command) return gen3d::app::cli::cmd_bench_dit(bench_dit);
    if (*bench_shape.command) return gen3d::app::cli::cmd_bench_shape(bench_shape);
    if (*bench_paint.command) return gen3d::app::cli::cmd_bench_paint(bench_paint);
    if (*bench_single.command) return gen3d::app::cli::cmd_bench_single_image(bench_single);
    if (*cache_cmd.info || *cache_cmd.clear || *cache_cmd.verify)
      return gen3d::app::cli::cmd_cache(cache_cmd);
    if (*batch_cmd) {
      if (!shard.empty()) {
        const auto slash = shard.find('/');
        try {
          if (slash == std::string::npos) throw std::invalid_argument(shard);
          batch.shard_index = std::stoi(shard.substr(0, slash));
          batch.shard_count = std::stoi(shard.substr(slash + 1));
        } catch (const std::exception&) {
          throw gen3d::pipeline::ConfigError("--shard " + shard + ": expected I/N, e.g. 0/4");
        }
      }
      return gen3d::app::cli::cmd_batch(batch);
    }
    if (*validate_cmd) return gen3d::app::cli::cmd_validate(config, sets, dump);
    if (*stages_cmd)
      return gen3d::app::cli::cmd_stages(as_json       ? gen3d::app::cli::StagesFormat::kJson
                                         : as_markdown ? gen3d::app::cli::StagesFormat::kMarkdown
                                                       : gen3d::app::cli::StagesFormat::kText);
    if (*schema_cmd) return gen3d::app::cli::cmd_schema();
    if (*graph_cmd) return gen3d::app::cli::cmd_graph(config, sets);
  } catch (const gen3d::pipeline::ConfigError& e) {
    spdlog::error("{}", e.what());
    return 2;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
  return 2;
}
