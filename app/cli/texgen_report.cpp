#include "app/cli/texgen_report.h"

#include <algorithm>
#include <map>
#include <string_view>

#include <fmt/format.h>

#include "image/codec.h"
#include "image/resize.h"
#include "io/base64.h"
#include "mesh/pbr.h"
#include "pipeline/run_report.h"
#include "render/surface_fill.h"
#include "stages/report_views.h"
#include "stages/types.h"

namespace gen3d::app::cli {

using pipeline::Graph;
using pipeline::RunResult;

namespace {

// An <img> of `image` scaled to fit `size` pixels, or a placeholder for an empty image.
std::string img_tag(const image::Image& image, int size, const std::string& caption) {
  if (image.empty())
    return fmt::format("<figure><div class=empty></div><figcaption>{} (none)</figcaption></figure>",
                       caption);
  const double scale = static_cast<double>(size) / std::max(image.width, image.height);
  const std::string png = image::encode_image(
      scale < 1.0 ? image::resize_image(image, std::max(1, static_cast<int>(image.width * scale)),
                                        std::max(1, static_cast<int>(image.height * scale)), "area")
                  : image,
      ".png", caption);
  return fmt::format(
      "<figure><img src=\"data:image/png;base64,{}\"><figcaption>{}</figcaption></figure>",
      io::base64_encode(png), caption);
}

// The first node output of type T from a node running `stage`.
template <class T>
std::shared_ptr<const T> output_of_stage(const Graph& g, const RunResult& run,
                                         const std::string& stage, const std::string& port) {
  for (const auto& n : g.nodes)
    if (n.contract && n.contract->name == stage)
      if (auto v = run.output<T>(g, n.id, port)) return v;
  return nullptr;
}

// The output wired to input `port` of the first node running `stage`: e.g. the view images the
// bake used, whichever stage made them.
template <class T>
std::shared_ptr<const T> input_of_stage(const Graph& g, const RunResult& run,
                                        const std::string& stage, const std::string& port) {
  for (const auto& n : g.nodes)
    if (n.contract && n.contract->name == stage)
      for (const auto& e : n.inputs)
        if (e.port == port) return run.output<T>(g, g.nodes[e.from].id, e.from_port);
  return nullptr;
}

const image::Image* texture_or(const std::shared_ptr<const image::Image>& t) {
  static const image::Image none;
  return t ? t.get() : &none;
}

std::string image_row(const std::shared_ptr<const stages::ImageList>& list,
                      const std::string& label) {
  if (!list) return {};
  std::string out = fmt::format("<h2>{}</h2><div class=row>", label);
  for (size_t v = 0; v < list->size(); ++v)
    out += img_tag((*list)[v], 160, fmt::format("view {}", v));
  return out + "</div>";
}

// SVG timeline: one lane per thread, one bar per node span, hover for details.
std::string timeline_svg(const pipeline::Profiler& profiler) {
  std::vector<pipeline::SpanRecord> spans;
  for (auto& s : profiler.spans())
    if (s.category == "node" || s.category == "cached") spans.push_back(s);
  if (spans.empty()) return {};
  std::map<int, int> lane;
  int64_t end = 1;
  for (const auto& s : spans) {
    lane.emplace(s.thread, static_cast<int>(lane.size()));
    end = std::max(end, s.start_ns + s.dur_ns);
  }
  const int width = 960, lane_h = 26;
  std::string svg = fmt::format("<svg width={} height={} class=timeline>", width + 80,
                                lane_h * static_cast<int>(lane.size()) + 24);
  for (const auto& [thread, l] : lane)
    svg += fmt::format("<text x=0 y={}>thread {}</text>", l * lane_h + 17, thread);
  for (const auto& s : spans) {
    const double x = 80 + width * static_cast<double>(s.start_ns) / end;
    const double w = std::max(1.0, width * static_cast<double>(s.dur_ns) / end);
    const int y = lane.at(s.thread) * lane_h;
    svg += fmt::format(
        "<g><rect x={:.1f} y={} width={:.1f} height={} rx=3{}><title>{}: {:.1f} ms{}</title>"
        "</rect><text x={:.1f} y={} class=bar>{}</text></g>",
        x, y + 2, w, lane_h - 4, s.category == "cached" ? " class=cached" : "", s.name,
        s.dur_ns / 1e6, s.category == "cached" ? " (from the stage cache)" : "", x + 3, y + 17,
        w > 60 ? s.name : "");
  }
  svg += fmt::format("<text x=80 y={}>0 ms</text><text x={} y={} text-anchor=end>{:.0f} ms</text>",
                     lane_h * lane.size() + 18, width + 80, lane_h * lane.size() + 18, end / 1e6);
  return svg + "</svg>";
}

}  // namespace

std::string texgen_report_html(const Graph& g, const RunResult& run,
                               const pipeline::Profiler& profiler) {
  std::string body;
  body += fmt::format(
      "<h1>gen3d texgen report</h1><p>pipeline <b>{}</b>, {:.0f} ms wall, peak RSS "
      "{:.0f} MiB</p>",
      g.name, run.wall_ms, pipeline::peak_rss_mb());
  body += image_row(output_of_stage<stages::ImageList>(g, run, "render_normals", "maps"),
                    "Normal maps");
  body += image_row(output_of_stage<stages::ImageList>(g, run, "render_positions", "maps"),
                    "Position maps");
  body +=
      image_row(input_of_stage<stages::ImageList>(g, run, "bake_views", "images"), "View images");
  body += image_row(output_of_stage<stages::ImageList>(g, run, "views_from_reference", "overlay"),
                    "Reference fit (the mesh's silhouette outlined in magenta)");

  const auto result = output_of_stage<stages::ImageList>(g, run, "render_albedo", "maps");
  body += image_row(result, "Result (base colour from the six views and two diagonals)");
  body += image_row(output_of_stage<stages::ImageList>(g, run, "render_shaded", "maps"),
                    "Lit result (base colour, metallic and roughness under one light from the "
                    "upper left)");
  // The same views of where the surface came from: what the reference showed and what was guessed.
  const auto inpainted_mesh = input_of_stage<mesh::Mesh>(g, run, "render_albedo", "mesh");
  const auto preview_views = input_of_stage<render::ViewSet>(g, run, "render_albedo", "views");
  const auto sources_report =
      output_of_stage<render::InpaintReport>(g, run, "inpaint_texture", "report");
  if (result && !result->empty() && inpainted_mesh && preview_views && sources_report) {
    auto sources = std::make_shared<const stages::ImageList>(stages::render_texel_sources(
        *inpainted_mesh, sources_report->sources, *preview_views, result->front().width));
    if (!sources->empty())
      body += image_row(sources,
                        "Where the result came from (green = seen by a view, cyan = seen where "
                        "the mesh's own UVs share the texel, blue = mirrored, orange = surface "
                        "fill, red = image inpainting)");
  }

  auto texture = output_of_stage<image::Image>(g, run, "inpaint_texture", "texture");
  auto merged = output_of_stage<render::MergeResult>(g, run, "merge_views", "merged");
  if (texture) {
    body += "<h2>Texture</h2><div class=row>" + img_tag(*texture, 480, "final texture");
    if (merged && merged->trust_mask.size() == texture->pixels.size() / 3) {
      // Texels no view painted are tinted red: what inpainting had to invent.
      image::Image overlay = *texture;
      for (size_t i = 0; i < merged->trust_mask.size(); ++i)
        if (!merged->trust_mask[i]) {
          float* p = overlay.pixels.data() + i * 3;
          p[0] = 0.5f * p[0] + 0.5f;
          p[1] *= 0.5f;
          p[2] *= 0.5f;
        }
      body += img_tag(overlay, 480, "coverage: red = not painted by any view");
    }
    auto inpainted = output_of_stage<render::InpaintReport>(g, run, "inpaint_texture", "report");
    const image::Image sources =
        inpainted ? render::source_colors(inpainted->sources, texture->width) : image::Image();
    if (!sources.pixels.empty())
      body += img_tag(sources, 480,
                      "texel sources: green = seen by a view, cyan = shared through the mesh's "
                      "own UVs, blue = mirrored, orange = surface fill, red = image inpainting, "
                      "grey = gutter");
    body += "</div>";
  }
  // The metallic-roughness texture as its two maps (white = metallic, white = rough).
  const auto pbr = output_of_stage<mesh::Mesh>(g, run, "attach_metallic_roughness", "mesh");
  if (pbr && pbr->pbr.texture && pbr->pbr.texture->channels >= 3) {
    body += "<h2>Metallic and roughness</h2><div class=row>";
    body += img_tag(*texture_or(pbr->texture), 320, "albedo");
    body += img_tag(mesh::metallic_channel(*pbr->pbr.texture), 320, "metallic (glTF B)");
    body += img_tag(mesh::roughness_channel(*pbr->pbr.texture), 320, "roughness (glTF G)");
    body += "</div>";
  }
  body += "<h2>Bake report</h2><table>";
  for (const auto& [name, value] : profiler.counter_totals())
    if (name.rfind("bake.", 0) == 0 || name.rfind("psnr.", 0) == 0 || name.rfind("uv.", 0) == 0 ||
        name.rfind("multiview.fit", 0) == 0 || name.rfind("inpaint.", 0) == 0 ||
        name.rfind("raster_cache.", 0) == 0)
      body += fmt::format("<tr><td>{}</td><td>{:.4g}</td></tr>", name, value);
  body += "</table><h2>Timeline</h2>" + timeline_svg(profiler);
  body +=
      "<h2>Stages</h2><table><tr><th>node</th><th>stage</th><th>start ms</th><th>wall "
      "ms</th><th>stage cache</th></tr>";
  for (const auto& n : run.nodes) {
    const std::string cache =
        n.cached ? fmt::format("{}, {:.0f} ms saved", n.loaded ? "loaded" : "cached, not needed",
                               n.saved_ms)
        : n.stored
            ? fmt::format("stored ({:.1f} MiB)", static_cast<double>(n.cache_bytes) / 1048576)
            : std::string();
    body += fmt::format("<tr><td>{}</td><td>{}</td><td>{:.1f}</td><td>{:.1f}</td><td>{}</td></tr>",
                        n.id, n.stage, n.start_ms, n.wall_ms, cache);
  }
  body += "</table>";
  return "<!doctype html><html><head><meta charset=utf-8><title>gen3d texgen report</title><style>"
         "body{font:14px "
         "sans-serif;margin:24px;color:#222}.row{display:flex;flex-wrap:wrap;gap:8px}"
         "figure{margin:0}figcaption{font-size:12px;color:#555}img{background:#eee;display:block}"
         ".empty{width:160px;height:160px;background:#f3f3f3}table{border-collapse:collapse}"
         "td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}"
         ".timeline rect{fill:#6a9fd8}.timeline rect.cached{fill:#8fbf7f}"
         ".timeline text{font-size:11px}.timeline .bar{fill:#fff}"
         "</style></head><body>" +
         body + "</body></html>\n";
}

}  // namespace gen3d::app::cli
