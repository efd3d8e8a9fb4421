// Progress on the command line, end to end: the status line on a terminal (a pseudo-terminal
// here) naming the running nodes, log lines that never share a row with it, no status line when
// stderr is not a terminal or with -q, and `--progress json` events from a tiny model run, steps
// included.

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/paths.h"
#include "support/run_command.h"
#include "support/tiny_models.h"

namespace gen3d::test {
namespace {

// Runs build/gen3d with `args` (a shell fragment: redirections allowed) on a pseudo-terminal of
// 200 columns for stdin, stdout and stderr; `output` is everything the terminal received.
CommandResult run_in_terminal(const std::string& args, int timeout_s = 120) {
  const std::string command = "cd '" + source_dir() +
                              "' && GEN3D_CACHE_DIR=off GEN3D_LOG_LEVEL=info exec '" +
                              gen3d_executable() + "' " + args;
  winsize ws{};
  ws.ws_row = 50;
  ws.ws_col = 200;
  int terminal = -1;
  const pid_t pid = forkpty(&terminal, nullptr, nullptr, &ws);
  if (pid < 0) throw std::runtime_error("forkpty failed");
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  CommandResult r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  char buffer[4096];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    pollfd p{terminal, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    const ssize_t n = read(terminal, buffer, sizeof buffer);
    if (n > 0)
      r.output.append(buffer, static_cast<std::size_t>(n));
    else if (n < 0 && errno == EINTR)
      continue;
    else
      break;  // EIO: every process on the terminal has closed it
  }
  close(terminal);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The rows a terminal ends up showing for `raw`: a carriage return goes back to the row's start
// (later text overwrites), ESC[K erases to the end of the row, other escape sequences (colors)
// show nothing, and a newline starts the next row.
std::vector<std::string> screen_rows(const std::string& raw) {
  std::vector<std::string> rows;
  std::string row;
  std::size_t col = 0;
  for (std::size_t k = 0; k < raw.size(); ++k) {
    const char c = raw[k];
    if (c == '\n') {
      rows.push_back(row);
      row.clear();
      col = 0;
    } else if (c == '\r') {
      col = 0;
    } else if (c == '\033' && k + 1 < raw.size() && raw[k + 1] == '[') {
      std::size_t j = k + 2;
      while (j < raw.size() && !(raw[j] >= 0x40 && raw[j] <= 0x7e)) ++j;
      if (j < raw.size() && raw[j] == 'K') row.resize(col);
      k = j;
    } else {
      if (col < row.size())
        row[col] = c;
      else
        row.push_back(c);
      ++col;
    }
  }
  if (!row.empty()) rows.push_back(row);
  return rows;
}

const std::regex kStatus(R"(\[\d+/\d+\] (\d+\.\d s|\d+m\d\ds|\d+h\d\dm))");
const std::regex kLogLine(R"(\[\d\d:\d\d:\d\d\.\d{3}\] \[)");

const std::string kTexture =
    "texture --mesh assets/meshes/spider/spider.obj --image assets/images/spider_front.png "
    "--texture-size 256 --render-size 256 ";

TEST(ProgressCli, StatusLineOnATerminalNeverSharesARowWithLogLines) {
  const std::string dir = temp_dir("progress_terminal");
  const auto r = run_in_terminal(kTexture + "-o " + dir + "/out.glb");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // (a) The status line was drawn, naming running nodes: "[3/17] 0.1 s | delight | uv".
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex(R"(\r\x1b\[K\[\d+/\d+\] \d+\.\d s \| (delight|uv|mesh|image))")))
      << r.output;
  // (b) What the terminal shows in the end: every log line starts its own row, and no status
  // text is left anywhere (each was erased before a log line or the summary was printed).
  int log_rows = 0;
  for (const std::string& row : screen_rows(r.output)) {
    std::smatch m;
    if (std::regex_search(row, m, kLogLine)) {
      ++log_rows;
      EXPECT_EQ(m.position(0), 0) << "a log line shares its row: " << row;
    }
    EXPECT_FALSE(std::regex_search(row, kStatus)) << "status text left on a row: " << row;
  }
  EXPECT_GE(log_rows, 3) << r.output;  // the run logs info lines and a uv warning meanwhile
  EXPECT_NE(r.output.find("warning"), std::string::npos);
}

TEST(ProgressCli, NoStatusLineWhenStderrIsNotATerminalOrQuiet) {
  const std::string dir = temp_dir("progress_piped");
  // (c) stdout on the terminal, stderr into a file.
  const auto r = run_in_terminal(kTexture + "-o " + dir + "/out.glb 2> " + dir + "/err.txt");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir + "/err.txt");
  const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(std::regex_search(err, kLogLine)) << err;
  EXPECT_EQ(err.find('\r'), std::string::npos) << err;
  EXPECT_EQ(err.find("\033[K"), std::string::npos) << err;
  EXPECT_FALSE(std::regex_search(err, kStatus)) << err;
  EXPECT_FALSE(std::regex_search(r.output, kStatus)) << r.output;
  // On a terminal, -q and --progress none draw none either.
  for (const char* flags : {"-q ", "--progress none "}) {
    const auto t = run_in_terminal(std::string(flags) + kTexture + "-o " + dir + "/out.glb");
    ASSERT_EQ(t.exit_code, 0) << flags << t.output;
    EXPECT_EQ(t.output.find("\033[K"), std::string::npos) << flags << t.output;
    EXPECT_FALSE(std::regex_search(t.output, kStatus)) << flags << t.output;
  }
  EXPECT_EQ(run_gen3d("--progress sometimes stages").exit_code, 2);
}

// (d) A tiny shape model run (DINOv2 conditioner, 4 sampler steps, VAE, volume decoding):
// every line on stderr is a JSON event, and the model stages report their steps.
TEST(ProgressCli, JsonEventsOneALineWithModelSteps) {
  const std::string dir = temp_dir("progress_json");
  const TinyModelFolder f = write_tiny_model_folder(dir + "/model", 7, TinyConfigFile::kYaml);
  const auto r = run_in_terminal("--progress json shape --model " + f.dir +
                                 " --image assets/images/spider_front.png --steps 4 "
                                 "--resolution 64 --min-resolution 16 -o " +
                                 dir + "/shape.glb 2> " + dir + "/events.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir + "/events.jsonl");
  std::vector<nlohmann::json> events;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(line)) << "not JSON: " << line;
    ASSERT_TRUE(j.is_object() && j.contains("event") && j["t"].is_number()) << line;
    events.push_back(std::move(j));
  }
  ASSERT_GE(events.size(), 4u);
  std::map<std::string, std::string> stage_of;    // node -> stage, from node_started
  std::map<std::string, int> started, finished;   // per node
  std::map<std::string, std::vector<int>> steps;  // "node/label" -> i in order
  int runs_started = 0, runs_ok = 0, logs = 0;
  for (const auto& e : events) {
    const std::string kind = e["event"];
    if (kind == "run_started") ++runs_started;
    if (kind == "run_finished" && e["status"] == "ok") ++runs_ok;
    if (kind == "log" || kind == "warning") ++logs;
    if (kind == "node_started") {
      stage_of[e["node"]] = e["stage"];
      ++started[e["node"]];
    }
    if (kind == "node_finished") {
      EXPECT_EQ(started[e["node"]], 1) << "finished before it started: " << e.dump();
      EXPECT_EQ(e["status"], "done") << e.dump();
      EXPECT_GE(e["seconds"].get<double>(), 0.0);
      ++finished[e["node"]];
    }
    if (kind == "step") {
      ASSERT_TRUE(e.contains("node")) << e.dump();
      EXPECT_EQ(started[e["node"]], 1) << "a step outside its node: " << e.dump();
      EXPECT_EQ(finished[e["node"]], 0) << "a step outside its node: " << e.dump();
      EXPECT_LE(e["i"].get<int>(), e["n"].get<int>());
      EXPECT_EQ(e.contains("eta_s"), e["i"].get<int>() > 0) << e.dump();
      steps[e["node"].get<std::string>() + "/" + e["label"].get<std::string>()].push_back(e["i"]);
    }
  }
  EXPECT_EQ(runs_started, 1);
  EXPECT_EQ(runs_ok, 1);
  EXPECT_GT(logs, 0);
  EXPECT_EQ(events.back()["event"], "run_finished");
  EXPECT_EQ(started, finished);
  // The sampler's steps, under the denoise node.
  std::string denoise;
  for (const auto& [node, stage] : stage_of)
    if (stage == "denoise") denoise = node;
  ASSERT_FALSE(denoise.empty());
  EXPECT_EQ(steps[denoise + "/denoise step"], (std::vector<int>{0, 1, 2, 3, 4}));
  // Volume decoding's chunks and weight loading report too.
  bool decode = false, weights = false;
  for (const auto& [key, is] : steps) {
    decode = decode || key.find("/decode chunk") != std::string::npos;
    weights = weights || key.find("/loading weights") != std::string::npos;
  }
  EXPECT_TRUE(decode);
  EXPECT_TRUE(weights);
}

// A long single stage reports its own phases: unwrapping the spider anew (its UVs overlap).
TEST(ProgressCli, UnwrapReportsItsPhases) {
  const std::string dir = temp_dir("progress_unwrap");
  const auto r = run_in_terminal("--progress json " + kTexture + "-o " + dir + "/out.glb 2> " +
                                 dir + "/events.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir + "/events.jsonl");
  std::vector<int> phases;
  for (std::string line; std::getline(in, line);) {
    const auto e = nlohmann::json::parse(line);
    if (e["event"] == "step" && e["label"] == "unwrap phase") {
      EXPECT_EQ(e["n"], 3) << line;
      phases.push_back(e["i"].get<int>());
    }
  }
  EXPECT_EQ(phases, (std::vector<int>{0, 1, 2, 3}));  // 0: the phase counter starts
}

}  // namespace
}  // namespace gen3d::test
