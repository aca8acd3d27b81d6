// The lmsim command-line tool. Bad input exits 2 with one message naming file, line and field.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "apps/common.hpp"

#ifndef LMSIM_VERSION
#define LMSIM_VERSION "0.0.0"
#endif

int main(int argc, char** argv) {
  CLI::App app{"lmsim: calibrated simulation and search of LLM training parallel strategies"};
  app.set_version_flag("--version", std::string("lmsim ") + LMSIM_VERSION);
  std::string level = "info";
  app.add_option("--log-level", level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.require_subcommand(1);
  app.parse_complete_callback([&] { spdlog::set_level(spdlog::level::from_str(level)); });
  spdlog::set_default_logger(spdlog::stderr_color_mt("lmsim"));
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  lmsim::app::register_models(app);
  lmsim::app::register_dataset(app);
  lmsim::app::register_predict(app);
  lmsim::app::register_calibrate(app);
  lmsim::app::register_search(app);
  lmsim::app::register_evaluate(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const lmsim::io::InputError& e) {
    std::cerr << "lmsim: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "lmsim: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
