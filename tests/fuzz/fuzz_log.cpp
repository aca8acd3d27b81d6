// libFuzzer target: a training log is read by the Megatron-LM and the Megatron-Bridge readers into a run whose
// values are in range, or refused with an InputError, never a crash.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/error.hpp"
#include "io/megatron_log.hpp"

namespace {
void check_run(const lmsim::io::MegatronRun& r) {
  if (!(r.iteration_time_s > 0) || r.devices < 1 || r.intervals_used < 1 || r.num_layers < 1) std::abort();
  if (r.strategy.devices() != r.devices) std::abort();
  for (const auto& [rank, bytes] : r.peak_memory_bytes)
    if (rank < 0 || rank >= r.devices || !(bytes > 0)) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("lmsim_fuzz_log_" + std::to_string(::getpid()))).string();
  {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  try {
    check_run(lmsim::io::read_megatron_log(path));
  } catch (const lmsim::io::InputError&) {
  }
  for (const std::int64_t devices : {std::int64_t{0}, std::int64_t{8}}) {
    try {
      check_run(lmsim::io::read_megatron_bridge_log(path, lmsim::io::MemoryReport::max_allocated, devices));
    } catch (const lmsim::io::InputError&) {
    }
  }
  std::filesystem::remove(path);
  return 0;
}
