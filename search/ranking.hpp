// lmsim/search/ranking.hpp — top-k and Pareto bookkeeping with a deterministic total order.
//
// Owns: Entry (objective, global index, time, memory), the order "objective, then configuration name, then
// scenario" (names are looked up only to break exact ties), a bounded top-k, the (time, peak memory) Pareto
// front, and merging either of them; merging is order-independent, so results do not depend on how the space
// was split across ranks and threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace lmsim::search {

struct Entry {
  double objective;
  std::uint64_t index;
  double time_s;
  double peak_bytes;
};

// Tie-break key of an index (configuration name and scenario), used only when objectives are equal.
using KeyFn = std::function<std::string(std::uint64_t)>;

// The k best entries. Each index must be offered at most once (O(log k) per offer, whatever k is): callers
// merge disjoint sets, or de-duplicate first.
class TopK {
 public:
  TopK(std::size_t k, const KeyFn* key) : k_(k), key_(key) {}
  void offer(const Entry& e);
  void merge(const std::vector<Entry>& es) {
    for (const auto& e : es) offer(e);
  }
  std::vector<Entry> sorted() const;  // best first
  const std::vector<Entry>& raw() const { return heap_; }

 private:
  bool better(const Entry& a, const Entry& b) const;
  std::size_t k_;
  const KeyFn* key_;
  std::vector<Entry> heap_;  // max-heap on "worse"
};

class Pareto {
 public:
  explicit Pareto(const KeyFn* key) : key_(key) {}
  void offer(const Entry& e);  // minimise (time_s, peak_bytes)
  void merge(const std::vector<Entry>& es) {
    for (const auto& e : es) offer(e);
  }
  const std::vector<Entry>& front() const { return front_; }  // sorted by time

 private:
  bool before(const Entry& a, const Entry& b) const;  // (time, memory, key)
  const KeyFn* key_;
  std::vector<Entry> front_;
};

}  // namespace lmsim::search
