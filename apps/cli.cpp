#include "apps/cli.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <sstream>

#include "apps/common.hpp"
#include "io/specs.hpp"

#ifndef LMSIM_VERSION
#define LMSIM_VERSION "0.0.0"
#endif
#include "lmsim_commit.hpp"  // LMSIM_COMMIT, generated at build time

namespace lmsim::app {

void build_cli(CLI::App& app, std::string& level) {
  app.description("lmsim: calibrated simulation and search of LLM training parallel strategies");
  app.set_version_flag("--version", std::function<std::string()>([] {
                         return std::string("lmsim ") + LMSIM_VERSION + " (" + LMSIM_COMMIT +
                                ")\ndata: " + io::data_dir();
                       }));
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.add_option("--log-level", level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  auto quiet = std::make_shared<bool>(false);
  app.add_flag("--quiet", *quiet, "only warnings and errors on stderr (same as --log-level warn), no progress");
  app.require_subcommand(1);
  app.fallthrough();  // global options also after the subcommand: `lmsim predict ... --log-level warn`
  app.parse_complete_callback([&level, quiet] {
    auto l = spdlog::level::from_str(level);
    if (*quiet && l < spdlog::level::warn) l = spdlog::level::warn;
    spdlog::set_level(l);
  });
  register_models(app);
  register_dataset(app);
  register_predict(app);
  register_calibrate(app);
  register_search(app);
  register_evaluate(app);
  register_export(app);
  register_plot(app);
}

CliOutcome run_cli(int argc, char** argv, const std::function<std::string()>& describe_rank) {
  set_command_line(std::vector<std::string>(argv, argv + argc));
  CLI::App app;
  std::string level = spdlog::level::to_string_view(spdlog::get_level()).data();
  if (level == "warning") level = "warn";
  build_cli(app, level);
  auto where = [&] { return describe_rank ? describe_rank() : std::string(); };
  CliOutcome r;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    r.code = app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    r.code = app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    r.code = app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::ostringstream msg;
    app.exit(e, msg, msg);
    r.code = 2;
    r.message = msg.str();
  } catch (const io::InputError& e) {
    r.code = 2;
    r.message = "lmsim: error" + where() + ": " + e.what();
  } catch (const std::exception& e) {
    r.code = 1;
    r.message = "lmsim: internal error" + where() + ": " + e.what();
  }
  return r;
}

CliOutcome run_cli_captured(const std::vector<std::string>& args) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  std::ostringstream captured;
  std::streambuf* old = std::cout.rdbuf(captured.rdbuf());
  CliOutcome r;
  try {
    r = run_cli(static_cast<int>(argv.size()), argv.data());
  } catch (...) {
    std::cout.rdbuf(old);
    throw;
  }
  std::cout.rdbuf(old);
  r.out = captured.str();
  return r;
}

}  // namespace lmsim::app
