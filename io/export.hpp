// lmsim/io/export.hpp — any lmsim HDF5 result as CSV files, for pandas and spreadsheets.
//
// Owns: walking a file's groups and writing each group whose 1-D datasets share one length as one CSV (columns in
// creation order; enumerations and booleans as their names; nested groups such as /ranking/breakdown become
// columns `breakdown/<name>`), streamed in slabs so a 94 M-row /all table needs no more memory than a slab.
#pragma once

#include <string>
#include <vector>

namespace lmsim::io {

// Writes <out_dir>/<group>.csv for every table of `h5_file` (the group path with '/' as '_'); returns the files
// written. Creates out_dir. Throws InputError for a file that is not HDF5 or an unwritable folder.
std::vector<std::string> export_csv(const std::string& h5_file, const std::string& out_dir);

}  // namespace lmsim::io
