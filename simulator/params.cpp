#include "simulator/params.hpp"

#include <cmath>

namespace lmsim {

const std::array<ParamInfo, kNumParams>& param_table() {
  static const std::array<ParamInfo, kNumParams> table = {{
      {"matmul_efficiency", "fraction", 0.05, 1.0, &PlatformParams::matmul_efficiency,
       "fraction of peak dense FLOP/s reached by a large GEMM", 0.15,
       "GEMM FLOPs mis-counted (which GEMMs run in FP8, attention shapes) or compute hidden under communication"},
      {"matmul_half_dim", "elements", 1.0, 4096.0, &PlatformParams::matmul_half_dim,
       "GEMM efficiency is matmul_efficiency * d / (d + matmul_half_dim), d the smallest of m, n, k", 64,
       "small-GEMM behaviour: tile quantisation, grouped expert GEMMs, or launch-bound phases"},
      {"vector_bandwidth_efficiency", "fraction", 0.02, 1.0, &PlatformParams::vector_bandwidth_efficiency,
       "fraction of HBM bandwidth reached by memory-bound kernels (norms, softmax, rotary, optimizer, ...)", 0.15,
       "memory-bound bytes mis-counted (kernel fusion, dropout, norms, MoE permutation)"},
      {"kernel_launch_us", "us", 0.0, 200.0, &PlatformParams::kernel_launch_us,
       "fixed time per kernel: launch and host-side dispatch", 10,
       "kernel counts or host-side overhead (CPU-bound dispatch, device synchronisations)"},
      {"intra_node_bandwidth_efficiency", "fraction", 0.02, 1.0, &PlatformParams::intra_node_bandwidth_efficiency,
       "fraction of the intra-node link bandwidth a ring collective reaches", 0.15,
       "intra-node traffic volume or overlap (SP, TP comm overlap, full-mesh links, all-to-all)"},
      {"inter_node_bandwidth_efficiency", "fraction", 0.02, 1.0, &PlatformParams::inter_node_bandwidth_efficiency,
       "fraction of the inter-node bandwidth a collective reaches", 0.15,
       "inter-node traffic or overlap (hierarchical collectives, DP/PP overlap, rails)"},
      {"collective_latency_us", "us", 0.0, 500.0, &PlatformParams::collective_latency_us,
       "software latency of one ring step or point-to-point message, added to the link's nominal latency", 20,
       "the number of collective calls or ring steps"},
      {"dp_overlap", "fraction", 0.0, 1.0, &PlatformParams::dp_overlap,
       "fraction of each second of NCCL traffic run beside compute (data-parallel, the interleaved pipeline's "
       "sends, the CP ring) that costs it nothing (the rest is contention: NCCL kernels' SMs and HBM traffic)",
       0.3, "how data-parallel traffic overlaps compute (bucketing, contention, pipeline slack)"},
      {"runtime_memory_gib", "GiB", 0.0, 16.0, &PlatformParams::runtime_memory_gib,
       "constant per-device memory outside tensors: runtime context, workspaces, communicator buffers", 1,
       "constant memory outside tensors (workspaces, communicator buffers)"},
      {"runtime_memory_fraction", "fraction", 0.0, 0.5, &PlatformParams::runtime_memory_fraction,
       "allocator caching and fragmentation, as a fraction of the bytes the model allocates", 0.05,
       "activation or allocator accounting (fragmentation, tensors kept alive)"},
      {"attention_score_bytes", "bytes/element", 0.0, 16.0, &PlatformParams::attention_score_bytes,
       "bytes stored per s x s attention-score element when attention is not flash (Korthikanti et al.: 5)", 2,
       "stored attention-score accounting (flash or fused softmax, dropout masks)"},
      {"fp8_matmul_efficiency", "fraction", 0.05, 1.0, &PlatformParams::fp8_matmul_efficiency,
       "fraction of peak FP8 FLOP/s reached by a large FP8 GEMM (Transformer Engine linear layers)", 0.15,
       "which GEMMs run in FP8 and the cost of their casts"},
      {"flash_attention_efficiency", "fraction", 0.05, 1.0, &PlatformParams::flash_attention_efficiency,
       "fraction of peak 16-bit FLOP/s reached by the fused flash-attention kernel (causal FLOPs counted)", 0.15,
       "attention FLOP counting (causal masking, backward recomputation)"},
      // Prior centre 512 tokens: the FlashAttention-3 paper (Shah et al. 2024), H100, causal forward, head dim
      // 128: cuDNN 410 TFLOP/s at 1K tokens and 539 at 16K, FlashAttention-3 423 and 616, which L / (L + h) of an
      // asymptote follows with h about 350 and 510. The backward, most of a training step's attention time, is
      // not in those curves: the prior is wide.
      {"flash_attention_half_seq", "tokens", 0.0, 65536.0, &PlatformParams::flash_attention_half_seq,
       "the flash kernel's efficiency is flash_attention_efficiency * L / (L + flash_attention_half_seq), L the "
       "sequence length of one call (under context parallelism, of one ring step): short sequences leave tiles idle",
       1024, "attention shapes: sequence per CP step, causal diagonal blocks, or per-step CP overheads"},
  }};
  return table;
}

double get(const PlatformParams& p, std::size_t i) { return p.*(param_table()[i].field); }
void set(PlatformParams& p, std::size_t i, double v) { p.*(param_table()[i].field) = v; }

std::string validate(const PlatformParams& p) {
  for (const auto& info : param_table()) {
    const double v = p.*(info.field);
    if (!std::isfinite(v)) return std::string(info.name) + " is not finite";
    if (v < info.lower || v > info.upper)
      return std::string(info.name) + " = " + std::to_string(v) + " is outside [" + std::to_string(info.lower) + ", " +
             std::to_string(info.upper) + "]";
  }
  return {};
}

}  // namespace lmsim
