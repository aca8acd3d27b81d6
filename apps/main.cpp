// The lmsim command-line tool. Bad input exits 2 with one message naming file, line and field.
#include <mpi.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <iostream>

#include "apps/common.hpp"

#ifndef LMSIM_VERSION
#define LMSIM_VERSION "0.0.0"
#endif

namespace {
// MPI is started only for the commands that use it; an error on any rank aborts the whole job (never a hang).
bool g_mpi = false;
int finish(int code) {
  if (g_mpi) {
    int size = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (code != 0 && size > 1) {
      std::cerr << "lmsim: aborting the job from rank " << rank << "\n";
      MPI_Abort(MPI_COMM_WORLD, code);
    }
    MPI_Finalize();
  }
  return code;
}
}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "search")) g_mpi = true;
  if (g_mpi) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED) {
      std::cerr << "lmsim: the MPI library does not provide MPI_THREAD_SERIALIZED\n";
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  CLI::App app{"lmsim: calibrated simulation and search of LLM training parallel strategies"};
  app.set_version_flag("--version", std::string("lmsim ") + LMSIM_VERSION);
  std::string level = "info";
  app.option_defaults()->always_capture_default();  // --help shows every default
  app.add_option("--log-level", level, "trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.require_subcommand(1);
  app.fallthrough();  // global options also after the subcommand: `lmsim predict ... --log-level warn`
  app.parse_complete_callback([&] { spdlog::set_level(spdlog::level::from_str(level)); });
  spdlog::set_default_logger(spdlog::stderr_color_mt("lmsim"));
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  lmsim::app::register_models(app);
  lmsim::app::register_dataset(app);
  lmsim::app::register_predict(app);
  lmsim::app::register_calibrate(app);
  lmsim::app::register_search(app);
  lmsim::app::register_evaluate(app);
  auto rank_prefix = [] {
    if (!g_mpi) return std::string();
    int size = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return size > 1 ? " (rank " + std::to_string(rank) + ")" : std::string();
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return finish(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return finish(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return finish(app.exit(e));
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return finish(2);
  } catch (const lmsim::io::InputError& e) {
    std::cerr << "lmsim: error" << rank_prefix() << ": " << e.what() << "\n";
    return finish(2);
  } catch (const std::exception& e) {
    std::cerr << "lmsim: internal error" << rank_prefix() << ": " << e.what() << "\n";
    return finish(1);
  }
  return finish(0);
}
