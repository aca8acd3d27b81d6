// libFuzzer target: a search checkpoint is accepted (and then holds only values inside the space) or refused
// with an InputError, never a crash. Each input is tried as is and with a valid checksum line appended, so the
// fuzzer reaches the value checks behind the checksum.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/error.hpp"
#include "io/hash.hpp"
#include "search/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("lmsim_fuzz_ckpt_" + std::to_string(::getpid()))).string();
  const lmsim::search::CheckpointKey key{"fp", 100, 1050};
  for (const std::string& text : {body, body + "SHA256 " + lmsim::io::sha256_hex(body) + "\n"}) {
    {
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f << text;
    }
    try {
      const lmsim::search::CheckpointState st = lmsim::search::read_checkpoint(path, key);
      for (const auto& [id, c] : st.chunk_counts)
        if (id * key.chunk >= key.space_size) std::abort();
      for (const auto& e : st.entries)
        if (e.index >= key.space_size || !st.chunk_counts.count(e.index / key.chunk)) std::abort();
    } catch (const lmsim::io::InputError&) {
    }
  }
  std::filesystem::remove(path);
  return 0;
}
