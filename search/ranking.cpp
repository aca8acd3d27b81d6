#include "search/ranking.hpp"

#include <algorithm>

namespace lmsim::search {

bool TopK::better(const Entry& a, const Entry& b) const {
  if (a.objective != b.objective) return a.objective < b.objective;
  if (a.index == b.index) return false;
  return (*key_)(a.index) < (*key_)(b.index);
}

void TopK::offer(const Entry& e) {
  if (k_ == 0) return;
  auto worse = [this](const Entry& a, const Entry& b) { return better(a, b); };  // heap top = worst
  if (heap_.size() < k_) {
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), worse);
    return;
  }
  if (!better(e, heap_.front())) return;
  std::pop_heap(heap_.begin(), heap_.end(), worse);
  heap_.back() = e;
  std::push_heap(heap_.begin(), heap_.end(), worse);
}

std::vector<Entry> TopK::sorted() const {
  std::vector<Entry> v = heap_;
  std::sort(v.begin(), v.end(), [this](const Entry& a, const Entry& b) { return better(a, b); });
  return v;
}

bool Pareto::before(const Entry& a, const Entry& b) const {
  if (a.time_s != b.time_s) return a.time_s < b.time_s;
  if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
  if (a.index == b.index) return false;
  return (*key_)(a.index) < (*key_)(b.index);
}

void Pareto::offer(const Entry& e) {
  // front_ is sorted by `before`; along it time rises and memory strictly falls.
  auto pos = std::lower_bound(front_.begin(), front_.end(), e,
                              [this](const Entry& a, const Entry& b) { return before(a, b); });
  if (pos != front_.end() && pos->index == e.index) return;
  if (pos != front_.begin()) {
    const Entry& prev = *(pos - 1);
    if (prev.peak_bytes <= e.peak_bytes) return;  // dominated (or an equal point with a smaller key)
  }
  auto end = pos;
  while (end != front_.end() && end->peak_bytes >= e.peak_bytes) ++end;  // now dominated by e
  pos = front_.erase(pos, end);
  front_.insert(pos, e);
}

}  // namespace lmsim::search
