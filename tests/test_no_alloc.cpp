// simulate() must not touch the heap (the search calls it millions of times per second).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "io/specs.hpp"
#include "simulator/simulator.hpp"

#if !defined(__SANITIZE_ADDRESS__)
namespace {
std::atomic<long> g_allocations{0};
}
// These replacements pair malloc with free themselves; once inlined, GCC sees the delete free a pointer a `new`
// returned and warns of a mismatch that is not there.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  ++g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

TEST(HotPath, SimulateAllocatesNothing) {
  using namespace lmsim;
  const Model m = io::presets().find_model("Qwen3-30B-A3B")->model;
  const io::SystemPreset& sp = *io::presets().find_system("h100_sxm_80g");
  const Strategy s = *parse_config_name("dp4-tp2-pp2-cp1-ep4-RC-vpp2").strategy;
  TrainingSettings t;
  t.global_batch_size = 64;
  double sink = 0;
  const long before = g_allocations.load();
  for (int i = 0; i < 100; ++i) sink += simulate(m, s, sp.system, t, sp.default_params).iteration_time_s;
  EXPECT_EQ(g_allocations.load(), before);
  EXPECT_GT(sink, 0);
  auto* probe = new std::vector<int>(100);  // the counter does see allocations
  EXPECT_GT(g_allocations.load(), before);
  delete probe;
}
#endif
