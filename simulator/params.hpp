// lmsim/simulator/params.hpp — the platform parameters θ of S_θ(x).
//
// Owns: the few physically meaningful, bounded parameters that calibration fits per platform, their units,
// bounds and documentation (one table, `param_table()`), and index-based access for optimizers.
#pragma once

#include <array>
#include <cstddef>
#include <string>

namespace lmsim {

struct PlatformParams {
  double matmul_efficiency = 0.70;                // fraction of peak FLOP/s a large GEMM reaches
  double matmul_half_dim = 64;                    // smallest GEMM dimension at which efficiency halves
  double vector_bandwidth_efficiency = 0.70;      // fraction of HBM bandwidth a memory-bound kernel reaches
  double kernel_launch_us = 8;                    // fixed cost of one kernel (launch + host dispatch), µs
  double intra_node_bandwidth_efficiency = 0.70;  // fraction of the intra-node link bandwidth a ring reaches
  double inter_node_bandwidth_efficiency = 0.70;  // fraction of the inter-node bandwidth a ring reaches
  double collective_latency_us = 10;              // software latency per ring step, on top of the link's own
  double dp_overlap = 0.5;                        // overlapped NCCL traffic share costing no compute
  double runtime_memory_gib = 0.5;                // per-device constant: context, workspaces, communicator buffers
  double runtime_memory_fraction = 0.05;          // allocator caching / fragmentation, fraction of allocated bytes
  double attention_score_bytes = 5;               // bytes kept per materialised attention-score element
  double fp8_matmul_efficiency = 0.6;             // fraction of FP8 peak a large FP8 GEMM reaches
  double flash_attention_efficiency = 0.5;        // fraction of 16-bit peak the fused flash-attention kernel reaches
  double flash_attention_half_seq = 512;          // sequence per kernel call at which flash reaches half of that

  bool operator==(const PlatformParams&) const = default;
};

struct ParamInfo {
  const char* name;
  const char* unit;
  double lower;
  double upper;
  double PlatformParams::*field;
  const char* doc;
  double prior_sd;         // standard deviation of the calibration prior around the preset's value, in `unit`
  const char* bound_hint;  // the structural effect a fit that pins this parameter on a bound may be absorbing
};

constexpr std::size_t kNumParams = 14;

// A θ key of lmsim before 2026-11-29, refused (θ files, --fix, --free) with the reason it is gone.
constexpr const char* kRetiredParam = "optimizer_bytes_per_param";
constexpr const char* kRetiredParamWhy =
    "is no longer a platform parameter: optimizer state follows from the training settings (precision, "
    "distributed_optimizer, optimizer_moments_allocated, reuse_fp32_param, bf16_optimizer_state, bf16_adam_moments)";
const std::array<ParamInfo, kNumParams>& param_table();

// Index i of the table; used by calibration to map a flat vector onto θ.
double get(const PlatformParams& p, std::size_t i);
void set(PlatformParams& p, std::size_t i, double v);
// Empty when every field is finite and inside its bounds, else names the first field that is not.
std::string validate(const PlatformParams& p);

}  // namespace lmsim
