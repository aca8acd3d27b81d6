// lmsim/search — the strategy space (space.hpp), deterministic top-k / Pareto bookkeeping (ranking.hpp) and the
// MPI + OpenMP sweep with checkpoints (sweep.hpp). Uses the simulator; knows nothing of files but checkpoints.
#pragma once

#include "search/explain.hpp"
#include "search/ranking.hpp"
#include "search/shortlist.hpp"
#include "search/space.hpp"
#include "search/sweep.hpp"
