#include "simulator/system.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace lmsim {

namespace {
// Links of device i to all others in the node's direct-link table.
int link_degree(const System& s, int i) {
  const int n = s.devices_per_node;
  int d = 0;
  for (int j = 0; j < n; ++j)
    d += s.intra_node_links[static_cast<std::size_t>(i) * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)];
  return d;
}
}  // namespace

const char* to_string(Precision p) {
  switch (p) {
    case Precision::fp16: return "fp16";
    case Precision::bf16: return "bf16";
    case Precision::fp8: return "fp8";
    case Precision::fp4: return "fp4";
  }
  return "?";
}

std::string validate(const System& s) {
  auto bad = [](double v) { return !std::isfinite(v) || v <= 0; };
  if (s.devices_per_node <= 0 || s.devices_per_node > 1024) return "devices_per_node must be in [1, 1024]";
  if (bad(s.peak_flops_fp16) && bad(s.peak_flops_bf16)) return "peak FLOP/s must be positive";
  if (!std::isfinite(s.peak_flops_fp8) || s.peak_flops_fp8 < 0) return "peak_tflops.fp8 must not be negative";
  if (!std::isfinite(s.peak_flops_fp4) || s.peak_flops_fp4 < 0) return "peak_tflops.fp4 must not be negative";
  if (bad(s.hbm_capacity_bytes)) return "hbm_capacity must be positive";
  if (bad(s.hbm_bandwidth_bytes_per_s)) return "hbm_bandwidth must be positive";
  if (bad(s.intra_node.bandwidth_bytes_per_s)) return "intra_node bandwidth must be positive";
  if (bad(s.inter_node.bandwidth_bytes_per_s)) return "inter_node bandwidth must be positive";
  if (!std::isfinite(s.intra_node.latency_s) || s.intra_node.latency_s < 0)
    return "intra_node latency must not be negative";
  if (!std::isfinite(s.inter_node.latency_s) || s.inter_node.latency_s < 0)
    return "inter_node latency must not be negative";
  const std::size_t n = static_cast<std::size_t>(s.devices_per_node);
  if (!s.intra_node_links.empty()) {
    if (s.intra_node_links.size() != n * n)
      return "intra_node.links must be a devices_per_node x devices_per_node matrix (" + std::to_string(n) + " x " +
             std::to_string(n) + ")";
    bool unlinked = false;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        const int l = s.intra_node_links[i * n + j];
        if (l < 0) return "intra_node.links: negative link count";
        if (l != s.intra_node_links[j * n + i])
          return "intra_node.links is not symmetric (device " + std::to_string(i) + ", device " + std::to_string(j) +
                 ")";
        if (i == j && l != 0) return "intra_node.links: device " + std::to_string(i) + " has a link to itself";
        unlinked |= i != j && l == 0;
      }
      if (link_degree(s, static_cast<int>(i)) == 0)
        return "intra_node.links: device " + std::to_string(i) + " has no link";
    }
    if (unlinked && bad(s.intra_node_host_bandwidth_bytes_per_s))
      return "intra_node.host_bandwidth_gb_per_s must be positive when some devices have no direct link";
  }
  return {};
}

NodeLinks::NodeLinks(std::vector<int> matrix) : m_(std::move(matrix)) {
  const auto n = static_cast<int>(std::lround(std::sqrt(static_cast<double>(m_.size()))));
  if (m_.empty() || static_cast<std::size_t>(n) * static_cast<std::size_t>(n) != m_.size()) return;  // validate says
  n_ = n;
  // Each device's link count, and whether every pair is joined alike: with a zero diagonal (validate) the pairs are
  // alike when no entry exceeds links(0, 1) and the least-linked device has n - 1 times it.
  max_degree_ = 0;
  int min_degree = std::numeric_limits<int>::max(), max_link = 0;
  for (int i = 0; i < n_; ++i) {
    int degree = 0;
    for (int j = 0; j < n_; ++j) {
      degree += links(i, j);
      max_link = std::max(max_link, links(i, j));
    }
    max_degree_ = std::max(max_degree_, degree);
    min_degree = std::min(min_degree, degree);
  }
  const int pair = n_ > 1 ? links(0, 1) : 0;
  mesh_ = pair > 0 && max_link == pair && min_degree == (n_ - 1) * pair;
  if (n_ > kTabledDevices) return;
  table_.resize(slot(n_, n_ - 1, 2) + 1);
  for (int members = 0; members <= n_; ++members)
    for (int stride = 0; stride < n_; ++stride) {
      table_[slot(members, stride, 0)] = work_out_ring(members, stride, false);
      table_[slot(members, stride, 1)] = work_out_ring(members, stride, true);
      table_[slot(members, stride, 2)] = work_out_neighbour(members, stride);
    }
}

NodeLinks::Fewest NodeLinks::ring(int members, int stride, bool chain) const {
  return tabled(members, stride) ? table_[slot(members, stride, chain ? 1 : 0)] : work_out_ring(members, stride, chain);
}

NodeLinks::Fewest NodeLinks::neighbour(int members, int stride) const {
  return tabled(members, stride) ? table_[slot(members, stride, 2)] : work_out_neighbour(members, stride);
}

// Both fold the link counts of every group of the shape as integers: the fewest links, and whether some member has
// none.
NodeLinks::Fewest NodeLinks::work_out_ring(int members, int stride, bool chain) const {
  Fewest f;
  if (!fits(members, stride)) return f;  // no group of the shape in a node
  if (mesh_) {                           // a full mesh: every group of this shape alike
    f.fewest = links(0, 1) * (chain ? 1 : members - 1);
    return f;
  }
  const int span = (members - 1) * stride;
  // Groups start at every offset for the chain of stage pairs, else at block + offset (offset < stride) of each
  // block of stride·members ranks: the Megatron rank order.
  const int block = chain ? 1 : stride * members, offsets = chain ? 1 : stride;
  for (int first = 0; first + span < n_; first += block) {
    for (int base = first; base < first + offsets && base + span < n_; ++base) {
      if (members == 2) {  // a pair: each member's degree is the links between them (no self-links)
        f.add(links(base, base + stride));
        continue;
      }
      for (int i = 0; i < members; ++i) {
        int degree = 0;
        for (int j = 0; j < members; ++j) degree += links(base + i * stride, base + j * stride);
        f.add(degree);
      }
    }
  }
  return f;
}

NodeLinks::Fewest NodeLinks::work_out_neighbour(int members, int stride) const {
  Fewest f;
  if (!fits(members, stride)) return f;
  if (mesh_) {
    f.fewest = links(0, 1);
    return f;
  }
  const int span = (members - 1) * stride, block = stride * members;
  for (int first = 0; first + span < n_; first += block) {
    for (int base = first; base < first + stride && base + span < n_; ++base) {
      for (int i = 0; i < members; ++i) f.add(links(base + i * stride, base + (i + 1 == members ? 0 : i + 1) * stride));
    }
  }
  return f;
}

LinkTable::LinkTable(const System& s) : links_(s.intra_node_links) {
  if (!links_.empty()) host_ = s.intra_node_host_bandwidth_bytes_per_s / s.intra_node.bandwidth_bytes_per_s;
}

// A member's links over the best-linked device's (its share of the device's bandwidth), the host path's share for
// one with none; 1 for a shape with no group inside the node.
double LinkTable::worst_share(NodeLinks::Fewest f) const {
  const double linked = f.fewest > 0 ? static_cast<double>(f.fewest) / links_.max_degree() : 1.0;
  return f.unlinked ? std::min(linked, host_) : std::min(linked, 1.0);
}

double LinkTable::ring_bandwidth_share(int members, int stride, bool chain) const {
  return links_.empty() ? 1.0 : worst_share(links_.ring(members, stride, chain));
}

double LinkTable::ring_neighbour_share(int members, int stride) const {
  return links_.empty() ? 1.0 : worst_share(links_.neighbour(members, stride));
}

double ring_bandwidth_share(const System& s, int members, int stride, bool chain) {
  return LinkTable(s).ring_bandwidth_share(members, stride, chain);
}

double ring_neighbour_share(const System& s, int members, int stride) {
  return LinkTable(s).ring_neighbour_share(members, stride);
}

}  // namespace lmsim
