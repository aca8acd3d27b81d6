#include "search/space.hpp"

#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>

namespace lmsim::search {

// Divisors in increasing order, by trial division up to sqrt(n): O(sqrt n), so a global batch of 2^30 costs
// 32,768 steps, not 10^9. Divisors beyond the int range are left out (no degree can be that large).
std::vector<int> divisors(std::int64_t n) {
  std::vector<int> low, high;
  for (std::int64_t i = 1; i * i <= n; ++i) {
    if (n % i != 0) continue;
    low.push_back(static_cast<int>(i));
    const std::int64_t j = n / i;
    if (j != i && j <= 2147483647) high.push_back(static_cast<int>(j));
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

namespace {
// The distinct values of a swept setting, in order given; {nullopt}, "as the base settings say", when none.
template <class T>
std::vector<std::optional<T>> sweep_values(const std::vector<T>& given) {
  std::vector<std::optional<T>> out;
  for (const T& v : given)
    if (std::find(out.begin(), out.end(), std::optional<T>(v)) == out.end()) out.emplace_back(v);
  if (out.empty()) out.emplace_back(std::nullopt);
  return out;
}
}  // namespace

std::vector<Scenario> scenarios_of(const System& system, const PlatformParams& params, const TrainingSettings& base,
                                   const std::vector<int>& devices, const std::vector<std::int64_t>& seqs,
                                   const std::vector<std::int64_t>& global_batches, const SettingSweep& sweep) {
  std::vector<Scenario> out;
  const auto flash = sweep_values(sweep.flash_attention);
  const auto dispatcher = sweep_values(sweep.moe_dispatcher);
  for (int dev : devices)
    for (auto seq : seqs.empty() ? std::vector<std::int64_t>{base.seq_length} : seqs)
      for (auto gbs : global_batches.empty() ? std::vector<std::int64_t>{base.global_batch_size} : global_batches)
        for (const auto& f : flash)
          for (const auto& d : dispatcher) {
            if (dev <= 0 || seq <= 0 || gbs <= 0)
              throw std::invalid_argument("sizes must be positive (devices " + std::to_string(dev) + ", seq " +
                                          std::to_string(seq) + ", global batch " + std::to_string(gbs) + ")");
            Scenario s{system, params, base, dev, ""};
            s.settings.seq_length = seq;
            s.settings.global_batch_size = gbs;
            s.settings.micro_batch_size = 1;
            if (f) s.settings.flash_attention = *f;
            if (d) s.settings.moe_token_dispatcher_type = *d;
            if (auto why = validate(s.settings); !why.empty()) throw std::invalid_argument(why);
            s.label = system.name + "/" + std::to_string(dev) + "dev/seq" + std::to_string(seq) + "/gbs" +
                      std::to_string(gbs) + (f ? (*f ? "/flash" : "/noflash") : "") +
                      (d ? std::string("/") + to_string(*d) : "");
            out.push_back(std::move(s));
          }
  return out;
}

namespace {
template <class T>
bool allowed(const std::vector<T>& list, T v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

// The virtual-pipeline degrees > 1 whose pp·vpp chunks the layers split into by the simulator's own rules
// (pipeline_split: evenly, or with the embedding and the loss each taking a layer's slot, as Llama-3.1-405B's 126
// layers run pp 8 vpp 8 and DeepSeek-V3's 61 + MTP pp 8 vpp 4): the divisors of either per-stage count.
std::vector<int> interleaving_degrees(const Model& m, int pp) {
  std::vector<int> out;
  if (pp <= 1) return out;
  for (std::int64_t slots : {m.num_layers, embedding_loss_slots(m)}) {
    if (slots % pp != 0) continue;
    for (int v : divisors(slots / pp)) {
      Strategy s;
      s.pipeline_parallel = pp;
      s.virtual_pipeline = v;
      if (v > 1 && pipeline_split(m, s, false)) out.push_back(v);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}
}  // namespace

Space::Space(const Model& m, std::vector<Scenario> scenarios, const SpaceFilter& f)
    : model_(m), scenarios_(std::move(scenarios)), filter_(f) {
  for (Recompute r : f.recompute) recompute_.emplace_back(r, 0);
  std::vector<int> layers = f.recompute_layers;
  std::sort(layers.begin(), layers.end());
  layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
  for (int n : layers) recompute_.emplace_back(Recompute::full, n);
  // FSDP variants pair only with the sharded optimizer; without an FSDP restriction the settings decide.
  if (f.fsdp.empty()) {
    for (bool d : f.distributed_optimizer) sharding_.emplace_back(d, std::nullopt);
  } else {
    for (bool fs : f.fsdp) {
      if (fs)
        sharding_.emplace_back(true, true);
      else
        for (bool d : f.distributed_optimizer) sharding_.emplace_back(d, false);
    }
  }
  for (std::size_t si = 0; si < scenarios_.size(); ++si) {
    const Scenario& sc = scenarios_[si];
    const std::int64_t gbs = sc.settings.global_batch_size;
    for (int tp : divisors(sc.devices)) {
      if (!allowed(f.tp, tp)) continue;
      for (int pp : divisors(sc.devices / tp)) {
        if (!allowed(f.pp, pp)) continue;
        std::vector<int> vpps;  // the same for every (cp, ep, etp) below
        if (allowed(f.vpp, 1)) vpps.push_back(1);
        for (int v : interleaving_degrees(m, pp))
          if (allowed(f.vpp, v)) vpps.push_back(v);
        // None the filter allows splits at this pp: its own values, which the rules then reject and count (never
        // vpp 1 in their place).
        if (vpps.empty()) vpps = f.vpp;
        // Block recompute of n layers per chunk where some chunk keeps a layer unrecomputed (n at least the widest
        // chunk is full recompute, swept already; an uneven split counts its wider chunks); where the layers do not
        // split, the rules reject it.
        std::vector<std::int64_t> widest;  // per entry of vpps; 0 where the layers do not split
        for (int v : vpps) {
          Strategy probe;
          probe.pipeline_parallel = pp;
          probe.virtual_pipeline = v;
          const auto split = pipeline_split(m, probe, true);
          widest.push_back(split ? split->widest_chunk() : 0);
        }
        std::vector<std::pair<int, std::uint32_t>> vrc;
        for (std::uint32_t k = 0; k < recompute_.size(); ++k)
          for (std::size_t j = 0; j < vpps.size(); ++j)
            if (recompute_[k].second == 0 || widest[j] == 0 || recompute_[k].second < widest[j])
              vrc.emplace_back(vpps[j], k);
        for (int cp : divisors(sc.devices / tp / pp)) {
          if (!allowed(f.cp, cp)) continue;
          const int dp = sc.devices / tp / pp / cp;
          if (!allowed(f.dp, dp)) continue;
          // Expert TP degrees (0: as tp, the default); ep then runs over the divisors of tp·cp·dp / etp.
          std::vector<int> etps = !m.is_moe() ? std::vector<int>{0} : f.etp.empty() ? std::vector<int>{0, 1} : f.etp;
          for (int& e : etps)
            if (e == tp) e = 0;
          std::sort(etps.begin(), etps.end());
          etps.erase(std::unique(etps.begin(), etps.end()), etps.end());
          for (int etp : etps) {
            const int stage_ranks = tp * cp * dp, expert_tp = etp > 0 ? etp : tp;
            if (stage_ranks % expert_tp != 0) continue;
            for (int ep : m.is_moe() ? divisors(stage_ranks / expert_tp) : std::vector<int>{1}) {
              if (!allowed(f.ep, ep)) continue;
              Tuple t{si,     dp, tp, pp, cp, ep, etp,
                      total_, {}, {}, 0,  {}, 0,  static_cast<std::uint32_t>(sharding_.size()),
                      0};
              // Nothing to shard over a one-rank data-parallel group (Megatron's dp·cp; for an MoE model also the
              // expert one): every (distributed optimizer, FSDP) variant is the same run, so one is swept, not FSDP
              // where another is allowed.
              if (one_rank_data_parallel(dp, tp, cp, expert_tp, ep)) {
                t.n_shard = 1;
                for (std::size_t v = sharding_.size(); v-- > 0;)
                  if (sharding_[v].second != true) t.shard0 = static_cast<std::uint32_t>(v);
              }
              if (gbs % dp == 0)
                for (int mb : divisors(gbs / dp))
                  if (allowed<std::int64_t>(f.micro_batch, mb)) t.mbs.push_back(mb);
              if (t.mbs.empty())  // kept so that the batch rule counts the rejection; only values the filter allows
                t.mbs = f.micro_batch.empty() ? std::vector<std::int64_t>{1} : f.micro_batch;
              t.vrc = vrc;
              t.n_sp = tp > 1 ? static_cast<std::uint32_t>(f.sequence_parallel.size()) : 1;
              if (cp > 1)
                for (CpCommType a : f.cp_comm_type) {
                  if (a != CpCommType::a2a_p2p) t.cpc.emplace_back(a, 0);
                  for (int u = 2; a == CpCommType::a2a_p2p && u < cp; ++u)
                    if (valid_ulysses_degree_in_cp(u, cp)) t.cpc.emplace_back(a, u);
                }
              t.n_cpc = t.cpc.empty() ? 1 : static_cast<std::uint32_t>(t.cpc.size());
              if (cp > 1 && !f.cp_comm_type.empty() && t.cpc.empty()) continue;  // no variant runs at this cp
              const std::uint64_t n =
                  static_cast<std::uint64_t>(t.vrc.size()) * t.mbs.size() * t.n_sp * t.n_shard * t.n_cpc;
              if (n == 0) continue;
              total_ += n;
              tuples_.push_back(std::move(t));
            }
          }
        }
      }
    }
  }
}

Candidate Space::at(std::uint64_t index) const {
  auto it = std::upper_bound(tuples_.begin(), tuples_.end(), index,
                             [](std::uint64_t i, const Tuple& t) { return i < t.first; });
  const Tuple& t = *(it - 1);
  std::uint64_t r = index - t.first;
  Candidate c;
  c.scenario = t.scenario;
  Strategy& s = c.strategy;
  s.data_parallel = t.dp;
  s.tensor_parallel = t.tp;
  s.pipeline_parallel = t.pp;
  s.context_parallel = t.cp;
  s.expert_parallel = t.ep;
  s.expert_tensor_parallel = t.etp;
  const auto& [dist, fsdp] = sharding_[t.shard0 + r % t.n_shard];
  s.distributed_optimizer = dist;
  s.fsdp = fsdp;
  r /= t.n_shard;
  if (!t.cpc.empty()) std::tie(s.cp_comm_type, s.ulysses_degree) = t.cpc[r % t.n_cpc];
  r /= t.n_cpc;
  if (t.tp > 1) s.sequence_parallel = filter_.sequence_parallel[r % t.n_sp];
  r /= t.n_sp;
  s.micro_batch_size = t.mbs[r % t.mbs.size()];
  r /= t.mbs.size();
  const auto& [vpp, k] = t.vrc[r];
  s.virtual_pipeline = vpp;
  s.recompute = recompute_[k].first;
  if (recompute_[k].second > 0) {
    s.recompute_method = RecomputeMethod::block;
    s.recompute_num_layers = recompute_[k].second;
  }
  return c;
}

std::string Space::signature() const {
  std::ostringstream o;
  for (const auto& [r, n] : recompute_) o << to_string(r) << n << ' ';
  for (bool b : filter_.sequence_parallel) o << b;
  o << '|';
  for (CpCommType c : filter_.cp_comm_type) o << to_string(c) << ' ';
  o << '|';
  for (const auto& [d, fs] : sharding_) o << d.value_or(false) << d.has_value() << fs.value_or(false) << fs.has_value();
  o << '\n';
  for (const Tuple& t : tuples_) {
    o << t.scenario << ' ' << t.dp << ' ' << t.tp << ' ' << t.pp << ' ' << t.cp << ' ' << t.ep << ' ' << t.etp << ' '
      << t.first << ' ' << t.n_sp << ' ' << t.n_cpc << ' ' << t.n_shard << ' ' << t.shard0 << ':';
    for (auto mb : t.mbs) o << ' ' << mb;
    o << ':';
    for (const auto& [a, u] : t.cpc) o << ' ' << to_string(a) << '/' << u;
    o << ':';
    for (const auto& [v, k] : t.vrc) o << ' ' << v << '/' << k;
    o << '\n';
  }
  return o.str();
}

}  // namespace lmsim::search
