// lmsim/simulator — S_θ(M, P, N) as value types and pure functions.
//
// What this library owns: model (M), strategy and training settings (P), system (N), platform parameters (θ),
// and `simulate()`, which predicts iteration time, per-rank peak memory and their breakdowns. It knows nothing of
// MPI, files or the command line. Headers:
//   model.hpp     architecture and parameter counts
//   system.hpp    devices and links
//   strategy.hpp  parallel degrees, configuration names, validity rules
//   params.hpp    θ: the fitted platform parameters and their bounds
//   simulate.hpp  the simulator and its diagnostics
#pragma once

#include "simulator/model.hpp"
#include "simulator/params.hpp"
#include "simulator/simulate.hpp"
#include "simulator/strategy.hpp"
#include "simulator/system.hpp"
