// lmsim/apps/cli.hpp — the lmsim command line, built once for every front end.
//
// Owns: the CLI11 application with every subcommand and global option, and running one command line with its
// errors mapped to exit codes and messages (2 for bad input, 1 for internal errors). The executable (main.cpp)
// and the Python module (python_module.cpp) both run commands through here, so they share one code path.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace lmsim::app {

// Adds every subcommand and the global options to `app`; `level` receives --log-level.
void build_cli(CLI::App& app, std::string& level);

struct CliOutcome {
  int code = 0;         // 0 success, 2 bad input, 1 internal error; help and version print and return 0
  std::string message;  // the error message when code != 0
  std::string out;      // what the command wrote to stdout (run_cli_captured only)
};

// Parses and runs one command line (args[0] is the program name). `describe_rank` adds " (rank r)" to messages.
CliOutcome run_cli(int argc, char** argv, const std::function<std::string()>& describe_rank = {});
// The same, in-process, with stdout captured into CliOutcome::out.
CliOutcome run_cli_captured(const std::vector<std::string>& args);

}  // namespace lmsim::app
