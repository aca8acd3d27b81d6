// Small builders shared by the tests.
#pragma once

#include "simulator/simulator.hpp"

namespace lmsim::test {

inline Strategy strat(int dp, int tp, int pp, int cp = 1, Recompute rc = Recompute::none) {
  Strategy s;
  s.data_parallel = dp;
  s.tensor_parallel = tp;
  s.pipeline_parallel = pp;
  s.context_parallel = cp;
  s.recompute = rc;
  return s;
}

}  // namespace lmsim::test
