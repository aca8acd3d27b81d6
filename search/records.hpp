// lmsim/search/records.hpp — `--write-all`: every candidate's outcome, spooled per rank, streamed into HDF5.
//
// Owns the spool (one binary file per rank, `rank_<r>.records` in the checkpoint folder: blocks of one chunk's
// records, each closed by its SHA-256) and the merge that writes `/all` chunk by chunk at the chunks' offsets,
// so memory stays O(chunk) on every rank whatever the space's size. Spools survive an interrupted run and are
// resumed with it; a torn last block (a killed rank) is cut off when the spool is reopened.
#pragma once

#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "io/hdf5.hpp"
#include "search/sweep.hpp"

namespace lmsim::search {

std::string records_path(const std::string& dir, int rank);

class RecordSpool {
 public:
  explicit RecordSpool(std::string path);  // appends after the file's last valid block
  ~RecordSpool();
  RecordSpool(const RecordSpool&) = delete;
  RecordSpool& operator=(const RecordSpool&) = delete;
  void append(std::uint64_t chunk_id, const std::vector<AllRecord>& records);
  void flush();

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

// Calls fn(chunk_id, records) for every valid block of one spool file; returns the byte length of the valid
// prefix (a torn or corrupted tail ends the scan).
std::uint64_t scan_spool(const std::string& path,
                         const std::function<void(std::uint64_t, const std::vector<AllRecord>&)>& fn);
// Chunk ids with a complete block in any spool of the folder.
std::set<std::uint64_t> spooled_chunks(const std::string& dir, std::uint64_t space_size, std::uint64_t chunk);

// Writes `/all` (one row per candidate, row = global index): scenario, dp, tp, pp, cp, ep, etp, vpp,
// micro_batch_size, recompute (enum), recompute_num_layers (int32: block recompute's layers per chunk, else 0),
// sequence_parallel, distributed_optimizer, fsdp (booleans), cp_comm_type (enum:
// p2p, a2a, allgather, a2a+p2p), ulysses_degree (int32: a2a+p2p's, else 0), status (enum of the
// rejection reasons), iteration_time_s, max_peak_memory_bytes. Throws when a chunk has no records.
void write_all_records(io::H5Writer& w, const Space& space, const std::string& dir, std::uint64_t chunk);

}  // namespace lmsim::search
