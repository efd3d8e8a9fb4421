#pragma once
// Runs a shell command for end-to-end tests and captures what it printed.

#include <string>

namespace gen3d::test {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr, interleaved
};

CommandResult run_command(const std::string& command);

// Runs build/gen3d with `args` (already shell-quoted as needed). A run still going after
// `timeout_s` seconds is ended and reported as exit code 124.
CommandResult run_gen3d(const std::string& args, int timeout_s = 300);

}  // namespace gen3d::test
