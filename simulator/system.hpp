// lmsim/simulator/system.hpp — the system N of a simulation instance x = (M, P, N).
//
// Owns: a device type (peak dense FLOP/s per dtype, HBM capacity and bandwidth) and the links between devices
// inside and across nodes. How many devices a job uses is a property of the strategy, not of the system.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace lmsim {

// The training precision. fp8 and fp4 run Transformer Engine's quantized linear layers (QKV, projection, FC1, FC2,
// experts) in that format and everything else in bf16 (fp16 where bf16 is absent); fp4 is TE's NVFP4BlockScaling
// recipe (Megatron-core --fp4-format e2m1 --fp4-recipe nvfp4; see Fp8Recipe for its costs).
enum class Precision { fp16, bf16, fp8, fp4 };
const char* to_string(Precision p);
// Transformer Engine quantizes the linear layers (FP8 or NVFP4).
constexpr bool quantizes_linear(Precision p) { return p == Precision::fp8 || p == Precision::fp4; }

struct Link {
  double bandwidth_bytes_per_s = 0;  // unidirectional, per device
  double latency_s = 0;
};

// Direct links inside a node instead of a switch (DGX-1's NVLink hybrid cube-mesh, the 910B server's HCCS mesh):
// a row-major n x n matrix of link counts (symmetric, zero diagonal: validate(System) checks it), immutable once
// made. What each group shape gets of it depends on the matrix alone, so it is worked out once, when the matrix is
// set, for every shape that fits in a node of up to kTabledDevices (simulate() asks for every group on every call);
// larger nodes work it out per query. Empty: a switch (NVSwitch).
class NodeLinks {
 public:
  // The fewest links a member of the worst group of a shape has (0: the shape has no group inside the node) and
  // whether some member of such a group has none (its traffic goes through the host).
  struct Fewest {
    int fewest = 0;
    bool unlinked = false;
    void add(int links) {  // one member's (or pair's) link count into the fold
      if (links == 0)
        unlinked = true;
      else if (fewest == 0 || links < fewest)
        fewest = links;
    }
  };
  static constexpr int kTabledDevices = 32;

  NodeLinks() = default;
  explicit NodeLinks(std::vector<int> matrix);
  bool empty() const { return m_.empty(); }
  std::size_t size() const { return m_.size(); }
  int operator[](std::size_t i) const { return m_[i]; }
  std::vector<int>::const_iterator begin() const { return m_.begin(); }
  std::vector<int>::const_iterator end() const { return m_.end(); }
  bool operator==(const NodeLinks& o) const { return m_ == o.m_; }
  int max_degree() const { return max_degree_; }  // the best-linked device's link count
  // A collective ring over `members` devices `stride` apart, each group of the Megatron rank order (or, `chain`,
  // the point-to-point pairs (d, d + stride) at every offset): its members' links among themselves.
  Fewest ring(int members, int stride, bool chain) const;
  // The pairs of ring neighbours (member i to i + 1, the last back to the first).
  Fewest neighbour(int members, int stride) const;

 private:
  int links(int a, int b) const { return m_[static_cast<std::size_t>(a * n_ + b)]; }
  Fewest work_out_ring(int members, int stride, bool chain) const;
  Fewest work_out_neighbour(int members, int stride) const;
  // Whether a group of the shape lies inside one node (in 64 bits: a stride may be as large as a job).
  bool fits(int members, int stride) const {
    return members > 1 && stride >= 1 && static_cast<long long>(members - 1) * stride < n_;
  }
  bool tabled(int members, int stride) const { return members <= n_ && stride < n_ && !table_.empty(); }
  std::size_t slot(int members, int stride, int kind) const {
    return (static_cast<std::size_t>(members) * static_cast<std::size_t>(n_) + static_cast<std::size_t>(stride)) * 3 +
           static_cast<std::size_t>(kind);
  }
  std::vector<int> m_;
  int n_ = 0, max_degree_ = 1;
  bool mesh_ = false;          // every pair joined by as many links (the 910B server's HCCS)
  std::vector<Fewest> table_;  // slot(members, stride, kind): kind 0 ring, 1 chain, 2 neighbour
};

struct System {
  std::string name;
  std::string device;
  int devices_per_node = 8;
  double peak_flops_fp16 = 0;  // dense FLOP/s
  double peak_flops_bf16 = 0;
  double peak_flops_fp8 = 0;  // 0 when the device has no FP8 units
  double peak_flops_fp4 = 0;  // 0 when the device has no FP4 units (NVFP4: Blackwell and later)
  double hbm_capacity_bytes = 0;
  double hbm_bandwidth_bytes_per_s = 0;
  Link intra_node;  // bandwidth: the device's whole intra-node bandwidth (all its links, or its switch port)
  Link inter_node;
  // Direct links inside a node instead of a switch: devices_per_node x devices_per_node link counts (NodeLinks).
  // Empty: a switch (NVSwitch), where every group gets the device's whole intra-node bandwidth. See
  // `ring_bandwidth_share`.
  NodeLinks intra_node_links;
  // Between two devices of a linked node with no direct link: the path through PCIe and the host.
  double intra_node_host_bandwidth_bytes_per_s = 0;
  // Matrix units that need operands in their own tiled layout (Ascend's fractal NZ format): every GEMM's inputs
  // and output pass through a layout-conversion (TransData) kernel in HBM.
  bool gemm_layout_conversion = false;
  // NVLink SHARP (NVSwitch gen3+: H100/H200, B200, GB200): NCCL's NVLS all-reduce reduces in the switch, so each
  // GPU sends and receives its buffer once instead of a ring's 2(n-1)/n times.
  bool nvlink_sharp = false;
  // The collective library offers NCCL's low-latency protocols (LL, LL128) beside Simple and picks the fastest per
  // call (every NVIDIA system). false: one bandwidth-oriented protocol (the Ascend preset: HCCL).
  bool nccl_protocols = true;
  // Streaming multiprocessors per GPU (datasheets; 0 where unstated): the share of the GPU that NCCL's kernels take
  // from compute they overlap, where that is published by SM count (`nccl_ub`).
  int sm_count = 0;
  // The device runs the frameworks' fused (flash) attention kernel. FlashAttention-2 and cuDNN's fused attention
  // (Transformer Engine) need compute capability 8.0 (Ampere) or newer; MindSpeed runs Ascend's
  // npu_fusion_attention. A V100 (sm70) has neither: Megatron-LM's attention there materialises the s x s scores,
  // which its settings default to (only a memory-efficient kernel such as PyTorch's SDPA would avoid them).
  bool fused_attention = true;
  // The platform runs an MoE layer's local experts as one grouped-matmul kernel: CANN's GroupedMatmul, which
  // MindSpeed calls (npu_gmm) for --moe-grouped-gemm. false: one GEMM launch per local expert, as Transformer
  // Engine's GroupedLinear runs them on NVIDIA GPUs (see Gemm::launches).
  bool grouped_gemm_kernel = false;
  // Bytes the fused attention kernel keeps per head and token for its backward: one fp32 log-sum-exp on NVIDIA
  // (FlashAttention-2, cuDNN); Ascend's npu_fusion_attention keeps its softmax max and sum, each [b, n, s, 8]
  // fp32 (MindSpeed's ring-attention update reads them in that shape): 64.
  double flash_softmax_stats_bytes = 4;
  // Dao's FlashAttention-2 (AttentionBackend::flash) as a fraction of the fused (cuDNN) kernel's throughput on this
  // device, where measured; 1 where no source compares them. H100 SXM5, BF16, head dim 128, 1K-16K tokens
  // (FlashAttention-3 paper, Shah et al. 2024, Figs. 5-6): FlashAttention-2 reaches 0.59-0.63 of cuDNN's forward
  // throughput with and without the causal mask and 0.61-0.64 of its backward: 0.62.
  double flash_attention_2_throughput = 1;
  // The tensor cores run MXFP8 GEMMs (OCP microscaling: 8-bit values with one shared 8-bit exponent per block of
  // 32): Blackwell (sm100) and later. Transformer Engine's MXFP8BlockScaling recipe (fp8_recipe mxfp8) refuses
  // other devices; Hopper's FP8 tensor cores take only per-tensor scales.
  bool mxfp8 = false;
  // The FP8 block-scaling recipe's GEMM (fp8_recipe blockwise) as a fraction of the per-tensor FP8 GEMM's throughput
  // on this device, where measured; 1 elsewhere. Hopper has no block-scaled MMA: the kernel scales and promotes its
  // partial sums outside the tensor cores every 128 elements of K. Transformer Engine's GEMM profiling example
  // (docs/examples/gemm_profiling, H200 NVL, a 5B model's shapes, 15,872 tokens) times a layer's GEMMs at 22.88 ms
  // under block scaling with its casts, 18.98 ms under delayed scaling with its casts (which cost what block
  // scaling's do: one fused kernel each, see Fp8Recipe) and 16.79 ms for the per-tensor kernels alone: the
  // block-scaled kernels take (22.88 - (18.98 - 16.79)) / 16.79 = 1.23x as long, 0.81 of the throughput (H100,
  // H200). Blackwell runs the recipe's GEMMs as MXFP8 ones in its block-scaled tensor cores (TE gemm.cpp), at 1.
  double fp8_block_scaled_gemm_throughput = 1;
  // An NVFP4 GEMM's throughput as a fraction of the FP4 peak, relative to the fraction an FP8 GEMM reaches of the
  // FP8 peak (θ's fp8_matmul_efficiency describes both), where measured; 1 elsewhere. Transformer Engine's GEMM
  // profiling example (docs/examples/gemm_profiling, B300 SXM6, a 5B model's 12 GEMM shapes, 15,872 tokens,
  // operands quantized beforehand) times a layer's GEMMs at 3.764 ms in NVFP4 and 6.812 ms in per-tensor FP8:
  // 1.81x, 5.1 PFLOP/s, well under the B300's FP4 peak, so its FP4 kernels were not bound by the FP4 tensor rate
  // but by what B200 shares with it (HBM, SMs, the FP8 kernels' 4.5 PFLOP/s dense peak). On B200 (9 PFLOP/s dense
  // FP4, 2x its FP8) that is 1.81 / 2 = 0.905 of the peak ratio (B200, GB200).
  double fp4_gemm_throughput = 1;

  double peak_flops(Precision p) const {
    switch (p) {
      case Precision::fp16: return peak_flops_fp16;
      case Precision::bf16: return peak_flops_bf16;
      case Precision::fp8: return peak_flops_fp8;
      case Precision::fp4: return peak_flops_fp4;
    }
    return 0;
  }
};

std::string validate(const System& s);

// The share of a device's intra-node bandwidth that a collective over `members` devices `stride` apart gets
// (devices base + i·stride, the Megatron rank order), the worst over the node's groups of that shape; `chain`: the
// point-to-point pairs (d, d + stride) between neighbouring pipeline stages, every offset d. On a switch, 1. On
// direct links, NCCL builds its rings over the links among the members, one directed ring per link a member has to
// the others, so the member with the fewest such links bounds the group (a DGX-1 TP pair on one NVLink: 1/6 of the
// six-link bandwidth); a member with none goes through the host. Allocation-free: it runs inside simulate().
double ring_bandwidth_share(const System& s, int members, int stride, bool chain = false);
// The share a point-to-point transfer between ring neighbours gets (member i to i + 1, the last back to the first,
// as a context-parallel ring passes K and V): the links of that pair, the worst over the ring and the node's groups
// of that shape. On a switch, 1; on the 910B's full mesh one link of seven.
double ring_neighbour_share(const System& s, int members, int stride);

// The shares above for one system, its host path's share read once (simulate() asks for every group). The System
// must outlive it.
class LinkTable {
 public:
  explicit LinkTable(const System& s);
  double ring_bandwidth_share(int members, int stride, bool chain = false) const;
  double ring_neighbour_share(int members, int stride) const;

 private:
  double worst_share(NodeLinks::Fewest f) const;
  const NodeLinks& links_;
  double host_ = 1;
};

}  // namespace lmsim
