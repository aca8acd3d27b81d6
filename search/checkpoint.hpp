// lmsim/search/checkpoint.hpp — a sweep's checkpoint files: the unit that writes, reads and validates them.
//
// Owns the format (one text file per rank, `rank_<r>.ckpt`, renamed into place): a header with the search's
// fingerprint, chunk and space size; one line per completed chunk with its counts; one line per top-k / Pareto
// entry; and a last line with the SHA-256 of everything before it. Reading checks the checksum first, then every
// value: chunk ids within the space, counts that add up to the chunk's length, entry indices within a completed
// chunk, finite positive times and memory. Any violation is an InputError naming the file and line.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "search/sweep.hpp"

namespace lmsim::search {

struct CheckpointKey {
  std::string fingerprint;  // of the search (sweep.hpp)
  std::uint64_t chunk = 0, space_size = 0;
};

struct CheckpointState {
  std::map<std::uint64_t, Counts> chunk_counts;  // completed chunks and what they counted
  std::vector<Entry> entries;                    // top-k and Pareto candidates of those chunks, each index once
};

std::string checkpoint_path(const std::string& dir, int rank);
// Atomic: written to a temporary file, then renamed (the temporary file is removed when writing fails).
void write_checkpoint(const std::string& path, const CheckpointKey& key, const CheckpointState& state);
// One file, validated. A checkpoint of another search is an InputError saying so.
CheckpointState read_checkpoint(const std::string& path, const CheckpointKey& key);
// The union of every `rank_*.ckpt` of a folder (a missing folder is an empty state).
CheckpointState read_checkpoints(const std::string& dir, const CheckpointKey& key);
// Removes the checkpoint and record files of a folder, then the folder if nothing else is in it.
void remove_checkpoints(const std::string& dir);

}  // namespace lmsim::search
