// The lmsim command-line tool. Bad input exits 2 with one message naming file, line and field.
#include <mpi.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <iostream>

#include "apps/cli.hpp"

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
  spdlog::set_default_logger(spdlog::stderr_color_mt("lmsim"));
  spdlog::set_pattern("[%H:%M:%S] %^%l%$ %v");
  auto rank_prefix = [] {
    if (!g_mpi) return std::string();
    int size = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return size > 1 ? " (rank " + std::to_string(rank) + ")" : std::string();
  };
  const lmsim::app::CliOutcome r = lmsim::app::run_cli(argc, argv, rank_prefix);
  if (!r.message.empty()) std::cerr << r.message << (r.message.back() == '\n' ? "" : "\n");
  return finish(r.code);
}
