// The web studio of `gen3d serve` in a real browser: headless Chromium driven through
// ChromeDriver's WebDriver protocol (W3C, JSON over HTTP, spoken with cpp-httplib). The page
// uploads a mesh and an image, runs a small texture job, colours every node of the job's graph from
// its events and shows the result in its three.js viewer; a screenshot of the viewer's canvas must
// show a model. Skips where no browser can start (no chromedriver or chromium: scripts/setup.sh
// installs them).

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "image/codec.h"
#include "io/base64.h"
#include "support/paths.h"
#include "support/serve_process.h"

namespace gen3d::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The first of `names` found on PATH (or the path in `env`, when set), else "".
std::string find_program(const char* env, const std::vector<std::string>& names) {
  const std::string given = env_or(env, "");
  if (!given.empty()) return fs::exists(given) ? given : "";
  std::istringstream path(env_or("PATH", "/usr/bin:/bin"));
  std::string dir;
  while (std::getline(path, dir, ':'))
    for (const std::string& n : names)
      if (!dir.empty() && ::access((dir + "/" + n).c_str(), X_OK) == 0) return dir + "/" + n;
  return "";
}

// A WebDriver failure: the command and what the driver said.
struct WebDriverError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ChromeDriver in a child process with one headless Chromium session; both end when destroyed.
class Browser {
 public:
  // Null (with `why` said) when no browser can start here.
  static std::unique_ptr<Browser> start(std::string& why) {
    const std::string driver = find_program("GEN3D_CHROMEDRIVER", {"chromedriver"});
    if (driver.empty()) {
      why =
          "no chromedriver on PATH (install Debian's chromium and chromium-driver, as "
          "scripts/setup.sh does, or set GEN3D_CHROMEDRIVER)";
      return nullptr;
    }
    auto b = std::unique_ptr<Browser>(new Browser(driver));
    if (!b->wait_ready()) {
      why = "chromedriver (" + driver + ") did not answer";
      return nullptr;
    }
    // Root (containers, CI) needs --no-sandbox; WebGL runs on SwiftShader, the CPU renderer.
    json args = {"--headless",
                 "--no-sandbox",
                 "--disable-dev-shm-usage",
                 "--window-size=1280,1000",
                 "--use-angle=swiftshader",
                 "--enable-unsafe-swiftshader",
                 "--disable-extensions"};
    json options = {{"args", args}};
    const std::string chromium =
        find_program("GEN3D_CHROMIUM", {"chromium", "chromium-browser", "google-chrome"});
    if (!chromium.empty()) options["binary"] = chromium;
    try {
      const json s = b->call(
          "POST", "/session",
          {{"capabilities",
            {{"alwaysMatch", {{"browserName", "chrome"}, {"goog:chromeOptions", options}}}}}});
      b->session_ = s["sessionId"];
    } catch (const WebDriverError& e) {
      why = std::string("headless Chromium did not start: ") + e.what();
      return nullptr;
    }
    return b;
  }

  ~Browser() {
    if (!session_.empty()) {
      try {
        call("DELETE", "/session/" + session_);
      } catch (const WebDriverError&) {
      }
    }
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  Browser(const Browser&) = delete;
  Browser& operator=(const Browser&) = delete;

  // A command of the session (`path` after /session/{id}); its "value".
  json command(const std::string& method, const std::string& path, const json& body = json{}) {
    return call(method, "/session/" + session_ + path, body);
  }

  void go(const std::string& url) { command("POST", "/url", {{"url", url}}); }

  // The first element matching a CSS selector (its WebDriver id).
  std::string element(const std::string& css) {
    const json e = command("POST", "/element", {{"using", "css selector"}, {"value", css}});
    return e.begin().value().get<std::string>();
  }
  void click(const std::string& css) { command("POST", "/element/" + element(css) + "/click"); }
  // Types `text` into an element: for a file input, the paths of the files to choose.
  void type(const std::string& css, const std::string& text) {
    command("POST", "/element/" + element(css) + "/value", {{"text", text}});
  }
  json script(const std::string& js) {
    return command("POST", "/execute/sync", {{"script", js}, {"args", json::array()}});
  }
  // PNG bytes of an element as the page shows it.
  std::string screenshot(const std::string& css) {
    return io::base64_decode(
        command("GET", "/element/" + element(css) + "/screenshot").get<std::string>());
  }
  std::string page_screenshot() {
    return io::base64_decode(command("GET", "/screenshot").get<std::string>());
  }

 private:
  explicit Browser(const std::string& driver) : port_(free_port()) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string port = "--port=" + std::to_string(port_);
      ::execl(driver.c_str(), driver.c_str(), port.c_str(), "--log-level=SEVERE",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }

  bool wait_ready() {
    for (int i = 0; i < 100; ++i) {
      try {
        if (call("GET", "/status").value("ready", false)) return true;
      } catch (const WebDriverError&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  json call(const std::string& method, const std::string& path, const json& body = json{}) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    const std::string text = body.is_null() ? "{}" : body.dump();
    httplib::Result r = method == "GET"    ? c.Get(path.c_str())
                        : method == "POST" ? c.Post(path.c_str(), text, "application/json")
                                           : c.Delete(path.c_str());
    if (!r) throw WebDriverError(method + " " + path + ": no answer");
    const json j = json::parse(r->body, nullptr, false);
    if (j.is_discarded()) throw WebDriverError(method + " " + path + ": " + r->body.substr(0, 400));
    if (r->status != 200) {  // {"value": {"error", "message", "stacktrace"}}: the message says it
      const json& v = j["value"];
      throw WebDriverError(
          method + " " + path + ": " +
          (v.is_object() && v.contains("message") ? v["message"].dump() : r->body.substr(0, 400)));
    }
    return j["value"];
  }

  int port_;
  pid_t pid_ = -1;
  std::string session_;
};

// What the page shows, read in one script.
const char* kPageState = R"js(
  const text = (id) => (document.getElementById(id) || {}).textContent || '';
  return {
    state: document.body.dataset.state, job: document.body.dataset.job || '',
    nodes: [...document.querySelectorAll('#graph .node')].map((g) => g.dataset.state),
    loaded: document.getElementById('viewer').dataset.loaded || '',
    status: text('state'), message: text('message'), health: text('health'), note: text('viewer-note'),
    download: document.getElementById('download').href,
    links: ['report', 'trace'].filter((id) => !document.getElementById(id).hidden),
  };)js";

const std::string kMesh = "tests/data/mesh/meshes-assimp/glTF2/BoxTextured.glb";
const std::string kImage = "assets/images/spider_front.png";

// A colour with 4 bits per channel.
int quantized(const float* rgb) {
  const auto q = [](float v) { return std::clamp(static_cast<int>(v * 16.f), 0, 15); };
  return q(rgb[0]) << 8 | q(rgb[1]) << 4 | q(rgb[2]);
}

TEST(Studio, RunsATextureJobAndShowsTheResult) {
  std::string why;
  const auto browser = Browser::start(why);
  if (!browser) GTEST_SKIP() << why;
  const ServeProcess server({"--texture-size", "256", "--render-size", "256", "--data",
                             temp_dir("studio_data_" + std::to_string(::getpid()))});
  const std::string out = temp_dir("studio_browser");
  const bool have_three = server.client().Get("/studio/three/build/three.module.js")->status == 200;

  browser->go(server.url() + "/");
  json page;
  for (int i = 0; i < 100; ++i) {  // the page's script has asked /health
    page = browser->script(kPageState);
    if (page["health"].get<std::string>().starts_with("gen3d")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(page["health"].get<std::string>().starts_with("gen3d")) << page.dump();
  EXPECT_EQ(page["state"], "idle");

  // A mesh, a reference image, the report (so that every node runs), then Run.
  browser->type("#mesh", source_dir() + "/" + kMesh);
  browser->type("#images", source_dir() + "/" + kImage);
  browser->click("input[name=report]");
  browser->click("#run");

  // Until the job ends and the viewer has drawn the result (or said it cannot).
  const auto t0 = std::chrono::steady_clock::now();
  size_t live = 0;  // looks at the graph while the job ran, with some nodes finished
  for (;;) {
    page = browser->script(kPageState);
    const std::string state = page["state"];
    if (state == "running")
      for (const json& n : page["nodes"]) live += n == "done" ? 1 : 0;
    if (state != "idle" && state != "running" &&
        (state != "done" || page["loaded"] == "true" ||
         page["note"].get<std::string>().find("unavailable") != std::string::npos))
      break;
    ASSERT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(180)) << page.dump();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::ofstream(out + "/page.png", std::ios::binary) << browser->page_screenshot();
  RecordProperty("seconds_to_result", std::to_string(seconds));
  ASSERT_EQ(page["state"], "done") << page.dump();

  // Every node of the job's graph is drawn, and shows finished.
  const auto job = server.client().Get(("/v1/jobs/" + page["job"].get<std::string>()).c_str());
  ASSERT_TRUE(job);
  const json graph = json::parse(job->body)["graph"];
  ASSERT_GT(graph["nodes"].size(), 5u);
  ASSERT_EQ(page["nodes"].size(), graph["nodes"].size()) << page.dump();
  const auto done = std::count(page["nodes"].begin(), page["nodes"].end(), json("done"));
  EXPECT_EQ(done, std::ssize(page["nodes"])) << "not every node shows done: " << page.dump();
  EXPECT_TRUE(page["download"].get<std::string>().starts_with("blob:")) << page.dump();
  EXPECT_EQ(page["links"], json::array({"report", "trace"})) << page.dump();
  std::cout << "studio: job done and shown in " << seconds << " s; " << graph["nodes"].size()
            << " nodes; " << live << " finished nodes seen while the job ran\n";

  // The run's critical path is outlined in the graph and named with the concurrency achieved.
  const json timing = browser->script(
      "return { text: document.getElementById('timing').textContent, "
      "critical: document.querySelectorAll('#graph .node.critical').length };");
  EXPECT_TRUE(timing["text"].get<std::string>().starts_with("critical path")) << timing.dump();
  EXPECT_NE(timing["text"].get<std::string>().find("concurrency"), std::string::npos);
  EXPECT_GT(timing["critical"].get<int>(), 2) << timing.dump();

  if (!have_three) {  // a build without libjs-three: the page says so instead
    EXPECT_NE(page["note"].get<std::string>().find("unavailable"), std::string::npos);
    GTEST_SKIP() << "this gen3d has no three.js (libjs-three): the viewer was not checked";
  }
  // The viewer's canvas shows a model: many pixels off its background (its most common colour,
  // whatever that is) in many colours.
  const std::string png = browser->screenshot("#viewer canvas");
  std::ofstream(out + "/viewer.png", std::ios::binary) << png;
  const image::Image shot =
      image::decode_image(reinterpret_cast<const uint8_t*>(png.data()), png.size(), "screenshot");
  ASSERT_GE(shot.channels, 3);
  std::map<int, size_t> histogram;
  for (int y = 0; y < shot.height; ++y)
    for (int x = 0; x < shot.width; ++x) ++histogram[quantized(shot.at(x, y))];
  const int background =
      std::max_element(histogram.begin(), histogram.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      })->first;
  const size_t covered = static_cast<size_t>(shot.width) * shot.height - histogram[background];
  const size_t colours = histogram.size() - 1;
  const double share = double(covered) / (double(shot.width) * shot.height);
  std::cout << "studio: viewer " << shot.width << "x" << shot.height << ", model on " << share * 100
            << "% of it, " << colours << " colours (screenshots in " << out << ")\n";
  EXPECT_GT(share, 0.03) << "the viewer's canvas is blank (" << out << "/viewer.png)";
  EXPECT_GT(colours, 20u) << "the model has no texture (" << out << "/viewer.png)";

  // The viewer's modes each draw the model otherwise.
  std::set<std::string> shots = {png};
  for (const std::string mode : {"base", "normal", "uv"}) {
    browser->click("#viewer-modes button[data-mode=" + mode + "]");
    EXPECT_EQ(browser->script("return document.getElementById('viewer').dataset.mode"), mode);
    const std::string shot_png = browser->screenshot("#viewer canvas");
    std::ofstream(out + "/viewer_" + mode + ".png", std::ios::binary) << shot_png;
    EXPECT_TRUE(shots.insert(shot_png).second) << "mode " << mode << " looks like another";
  }
}

// Waits up to `seconds` for `js` (a script's body returning a value) to return something truthy;
// returns its last value.
json wait_for(Browser& browser, const std::string& js, int seconds) {
  json v;
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(seconds)) {
    v = browser.script(js);
    if (!v.is_null() && v != false && v != "" && v != 0) return v;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return v;
}

// The editor's state: whether the config is valid ('true', 'false', '' while checking) and its
// problems with their JSON paths.
const char* kEditorState = R"js(
  return { valid: document.getElementById('config-state').dataset.valid,
           text: document.getElementById('config-state').textContent,
           problems: [...document.querySelectorAll('#problems li')].map((li) => ({ path: li.dataset.path, text: li.textContent })),
           run: !document.getElementById('run-config').disabled };)js";

// Rewrites the editor's config with `edit` (a function body over `c`, the parsed config) and
// fires the input event, as typing does.
void edit_config(Browser& browser, const std::string& edit) {
  browser.script(
      "const area = document.getElementById('config'); const c = JSON.parse(area.value);" + edit +
      "; area.value = JSON.stringify(c, null, 2);"
      "area.dispatchEvent(new Event('input', { bubbles: true })); return true;");
}

// The config editor: a texture job's config is shown, an invalid edit is reported at its JSON path
// as it is typed, and the fixed config runs again with its unchanged nodes from the stage cache,
// drawn in the cached nodes' colour.
TEST(Studio, EditsTheConfigAndRunsItAgainFromTheCache) {
  std::string why;
  const auto browser = Browser::start(why);
  if (!browser) GTEST_SKIP() << why;
  const std::string dir = temp_dir("studio_config_" + std::to_string(::getpid()));
  const ServeProcess server({"--texture-size", "256", "--render-size", "256", "--data",
                             dir + "/data", "--cache", dir + "/cache", "--cache-all"});
  browser->go(server.url() + "/");
  ASSERT_TRUE(wait_for(*browser,
                       "return document.getElementById('health').textContent.startsWith('gen3d')",
                       10)
                  .get<bool>());
  // The shipped example fills the form.
  browser->click("#example");
  ASSERT_TRUE(wait_for(*browser,
                       "return document.getElementById('mesh').files.length === 1 && "
                       "document.getElementById('images').files.length === 1",
                       10)
                  .get<bool>())
      << browser->script(kPageState).dump();
  browser->click("#run");
  const char* finished =
      "return ['done', 'failed', 'cancelled'].includes(document.body.dataset.state) && "
      "document.body.dataset.job";
  const std::string first = wait_for(*browser, finished, 180).get<std::string>();
  ASSERT_EQ(browser->script("return document.body.dataset.state"), "done");

  // The job's config is in the editor, and valid.
  json editor = wait_for(*browser,
                         "return document.getElementById('config-state').dataset.valid === 'true' "
                         "&& document.getElementById('config').value",
                         30);
  ASSERT_TRUE(editor.is_string()) << browser->script(kEditorState).dump();
  const json config = json::parse(editor.get<std::string>());
  ASSERT_EQ(config["name"], "texgen") << config.dump();
  size_t normals = 0;
  while (normals < config["nodes"].size() && config["nodes"][normals]["id"] != "normals") ++normals;
  ASSERT_LT(normals, config["nodes"].size());

  // An invalid value: reported at its JSON path, and the config cannot run.
  edit_config(*browser, "c.nodes.find((n) => n.id === 'normals').params.resolution = '2k'");
  editor = wait_for(*browser,
                    "return document.getElementById('config-state').dataset.valid === 'false'", 10);
  ASSERT_EQ(editor, true) << browser->script(kEditorState).dump();
  editor = browser->script(kEditorState);
  const std::string path = "/nodes/" + std::to_string(normals) + "/params/resolution";
  ASSERT_EQ(editor["problems"].size(), 1u) << editor.dump();
  EXPECT_EQ(editor["problems"][0]["path"], path) << editor.dump();
  EXPECT_NE(editor["problems"][0]["text"].get<std::string>().find("2k"), std::string::npos)
      << editor.dump();
  EXPECT_FALSE(editor["run"].get<bool>()) << editor.dump();

  // Fixed: valid again; run it.
  edit_config(*browser, "c.nodes.find((n) => n.id === 'normals').params.resolution = " +
                            config["nodes"][normals]["params"]["resolution"].dump());
  editor = wait_for(*browser,
                    "return document.getElementById('config-state').dataset.valid === 'true' && "
                    "!document.getElementById('run-config').disabled",
                    10);
  ASSERT_EQ(editor, true) << browser->script(kEditorState).dump();
  browser->click("#run-config");
  const std::string second = wait_for(*browser,
                                      "return ['done', 'failed', 'cancelled'].includes("
                                      "document.body.dataset.state) && document.body.dataset.job "
                                      "!== '" +
                                          first + "' && document.body.dataset.job",
                                      180)
                                 .get<std::string>();
  const json page = browser->script(kPageState);
  ASSERT_EQ(page["state"], "done") << page.dump();
  ASSERT_NE(second, first);

  // Its nodes came from the cache, and the graph draws them so.
  const json job = json::parse(server.client().Get(("/v1/jobs/" + second).c_str())->body);
  ASSERT_TRUE(job.contains("cache")) << job.dump();
  EXPECT_GT(job["cache"]["hits"].get<int>(), 0) << job.dump();
  EXPECT_EQ(job["cache"]["misses"], 0) << job.dump();
  const auto cached = std::count(page["nodes"].begin(), page["nodes"].end(), json("cached"));
  EXPECT_EQ(cached, std::ssize(job["cache"]["nodes"])) << page.dump();
  EXPECT_GT(cached, 0) << page.dump();
  EXPECT_NE(page["status"].get<std::string>().find("from the cache"), std::string::npos)
      << page.dump();
  const json colours = browser->script(
      "const stroke = (s) => { const r = document.querySelector(`#graph .node[data-state=${s}] "
      "rect`); return r ? getComputedStyle(r).stroke : ''; };"
      "return { cached: stroke('cached'), done: stroke('done') };");
  EXPECT_NE(colours["cached"], "") << colours.dump();
  EXPECT_NE(colours["cached"], colours["done"]) << colours.dump();
  std::ofstream(dir + "/rerun.png", std::ios::binary) << browser->page_screenshot();
  std::cout << "studio: the edited config ran again with " << cached << " of "
            << page["nodes"].size() << " nodes from the cache (screenshot " << dir
            << "/rerun.png)\n";
}

}  // namespace
}  // namespace gen3d::test
