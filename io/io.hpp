// lmsim/io — everything that touches files: specs and presets (specs.hpp), the LM-SimBench dataset reader
// (dataset.hpp), CSV (csv.hpp), HDF5 results (hdf5.hpp) and the one error type for bad input (error.hpp).
#pragma once

#include "io/csv.hpp"
#include "io/dataset.hpp"
#include "io/error.hpp"
#include "io/export.hpp"
#include "io/hdf5.hpp"
#include "io/megatron_log.hpp"
#include "io/published.hpp"
#include "io/specs.hpp"
