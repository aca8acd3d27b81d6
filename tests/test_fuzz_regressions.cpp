// Replays the fuzz corpora and every kept crash input (tests/fuzz/regressions/<target>/) through the fuzz
// targets' own entry points, built here without libFuzzer: a regression that crashes again fails this test.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

#define LLVMFuzzerTestOneInput fuzz_csv_one
#include "fuzz/fuzz_csv.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_json_one
#include "fuzz/fuzz_json.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_config_name_one
#include "fuzz/fuzz_config_name.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_checkpoint_one
#include "fuzz/fuzz_checkpoint.cpp"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_log_one
#include "fuzz/fuzz_log.cpp"
#undef LLVMFuzzerTestOneInput

namespace fs = std::filesystem;

namespace {
std::size_t replay(const std::string& target, int (*fn)(const std::uint8_t*, std::size_t)) {
  std::size_t n = 0;
  for (const char* kind : {"corpus", "regressions"}) {
    const fs::path dir = fs::path(LMSIM_TEST_FIXTURES).parent_path() / "fuzz" / kind / target;
    if (!fs::is_directory(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      std::ifstream in(e.path(), std::ios::binary);
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string s = ss.str();
      EXPECT_EQ(fn(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()), 0) << e.path();
      ++n;
    }
  }
  return n;
}
}  // namespace

TEST(FuzzRegressions, CsvInputsReplay) { EXPECT_GT(replay("csv", fuzz_csv_one), 0u); }
TEST(FuzzRegressions, JsonInputsReplay) { EXPECT_GT(replay("json", fuzz_json_one), 0u); }
TEST(FuzzRegressions, ConfigNameInputsReplay) { EXPECT_GT(replay("config_name", fuzz_config_name_one), 0u); }
TEST(FuzzRegressions, CheckpointInputsReplay) { EXPECT_GT(replay("checkpoint", fuzz_checkpoint_one), 0u); }
TEST(FuzzRegressions, LogInputsReplay) { EXPECT_GT(replay("log", fuzz_log_one), 0u); }
