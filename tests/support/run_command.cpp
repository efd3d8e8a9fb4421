#include "support/run_command.h"

#include <sys/wait.h>

#include <cstdio>
#include <stdexcept>

#include "support/paths.h"

namespace gen3d::test {

CommandResult run_command(const std::string& command) {
  CommandResult r;
  std::FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot run: " + command);
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

CommandResult run_gen3d(const std::string& args, int timeout_s) {
  // `timeout` turns a hang into exit code 124 instead of a stuck test (SIGKILL 10 s later if
  // SIGTERM is not enough). No stage cache unless a test names one (--cache DIR): runs must not
  // depend on what earlier tests left in a user cache directory.
  return run_command("cd '" + source_dir() +
                     "' && GEN3D_CACHE_DIR=off GEN3D_LOG_LEVEL=info timeout -k 10 " +
                     std::to_string(timeout_s) + " '" + gen3d_executable() + "' " + args);
}

}  // namespace gen3d::test
