// lmsim/search/space.hpp — the strategy space of a search, indexable and never materialised.
//
// Owns: scenarios (system, devices, sequence length, global batch) and, for each, the (dp, tp, pp, cp, ep, etp)
// tuples with dp·tp·pp·cp = devices (ep·etp dividing tp·cp·dp), crossed with recompute (and, if asked, partial block
// recompute), micro-batch (divisors of global/dp), virtual pipeline (degrees the layers split into), sequence parallel
// (tp > 1), distributed optimizer / FSDP and context-parallel algorithm (cp > 1) options. A global index maps to one
// candidate in O(log tuples); only the tuple table (a few thousand entries at most) is stored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "simulator/simulator.hpp"

namespace lmsim::search {

struct Scenario {
  System system;
  PlatformParams params;
  TrainingSettings settings;  // seq_length and global_batch_size (and flash_attention, when swept) per scenario
  int devices;
  std::string label;  // e.g. h100_sxm_80g/1024dev/seq8192/gbs1024, with /flash, /allgather, ... where swept
};

// Training settings swept as scenario dimensions, not layouts: framework flags that each layout can run with or
// without. Empty: as the base settings say (no label part).
struct SettingSweep {
  std::vector<bool> flash_attention;          // --use-flash-attn: labelled /flash, /noflash
  std::vector<MoeDispatcher> moe_dispatcher;  // --moe-token-dispatcher-type: labelled /alltoall, /allgather
};

// The scenarios of one system: every (devices, sequence length, global batch, swept setting) combination, each
// with the base settings (micro-batch left to the space) and a label `<system>/<n>dev/seq<s>/gbs<b>`, followed by
// `/flash` or `/noflash` where flash attention is swept and `/alltoall` or `/allgather` where the MoE dispatcher
// is; empty lists take the base settings' value, a repeated value is one scenario. Throws std::invalid_argument
// naming the offending size when one is not positive or the settings it makes are invalid (the same checks as a
// single prediction).
std::vector<Scenario> scenarios_of(const System& system, const PlatformParams& params, const TrainingSettings& base,
                                   const std::vector<int>& devices, const std::vector<std::int64_t>& seqs,
                                   const std::vector<std::int64_t>& global_batches, const SettingSweep& sweep = {});

// Restrictions; an empty list means "all valid values".
struct SpaceFilter {
  std::vector<int> dp, tp, pp, cp, ep, vpp;
  // Expert tensor parallel degrees of an MoE model (MoE parallel folding); 0 is "as tp". Empty: {0, 1}, the
  // attention's TP and whole experts per rank (expert_tensor_parallel_size 1, which every Megatron-Bridge MoE recipe
  // sets: data/public/NOTE.md).
  std::vector<int> etp;
  std::vector<std::int64_t> micro_batch;
  std::vector<Recompute> recompute = {Recompute::none, Recompute::selective, Recompute::full};
  // Partial full recompute swept beside the list above: Megatron's --recompute-method block with each of these
  // --recompute-num-layers, where it leaves some layer of the widest pipeline chunk unrecomputed (else it is full
  // recompute). Empty: none.
  std::vector<int> recompute_layers;
  std::vector<bool> sequence_parallel = {false, true};  // applies when tp > 1
  std::vector<bool> distributed_optimizer = {false, true};
  std::vector<bool> fsdp;  // empty: as the settings say; FSDP shards the optimizer too, so it pairs only with `do`
  // Context-parallel algorithms swept where cp > 1 (a2a+p2p at every Ulysses degree u, 1 < u < cp, dividing cp);
  // empty: the settings'.
  std::vector<CpCommType> cp_comm_type;
};

struct Candidate {
  std::size_t scenario;
  Strategy strategy;
};

// The strategy columns every result table writes (/ranking, /pareto, /best_per_scenario, /all), one row per
// candidate as it runs (the settings' defaults applied). `Int` and `Flag` are the tables' storage types.
template <class Int, class Flag>
struct StrategyColumns {
  std::vector<Int> dp, tp, pp, cp, ep, etp, vpp;
  std::vector<std::int64_t> micro_batch_size;
  std::vector<Recompute> recompute;
  std::vector<Int> recompute_num_layers;  // block recompute's layers per chunk; 0: every layer (or none)
  std::vector<Flag> sequence_parallel, distributed_optimizer, fsdp;
  std::vector<CpCommType> cp_comm_type;  // as it runs (meaningful where cp > 1)
  std::vector<Int> ulysses_degree;       // a2a+p2p's Ulysses degree in effect, else 0

  void add(const Strategy& s, const TrainingSettings& t) {
    const ResolvedStrategy r = resolve(s, t);
    dp.push_back(static_cast<Int>(s.data_parallel));
    tp.push_back(static_cast<Int>(s.tensor_parallel));
    pp.push_back(static_cast<Int>(s.pipeline_parallel));
    cp.push_back(static_cast<Int>(s.context_parallel));
    ep.push_back(static_cast<Int>(s.expert_parallel));
    etp.push_back(static_cast<Int>(s.expert_tensor()));
    vpp.push_back(static_cast<Int>(s.virtual_pipeline));
    micro_batch_size.push_back(r.micro_batch_size);
    recompute.push_back(s.recompute);
    recompute_num_layers.push_back(static_cast<Int>(s.recompute_num_layers));
    sequence_parallel.push_back(static_cast<Flag>(r.sequence_parallel));
    distributed_optimizer.push_back(static_cast<Flag>(r.distributed_optimizer));
    fsdp.push_back(static_cast<Flag>(r.fsdp));
    cp_comm_type.push_back(r.cp_comm_type);
    ulysses_degree.push_back(
        static_cast<Int>(r.cp_comm_type == CpCommType::a2a_p2p && s.context_parallel > 1 ? r.ulysses_degree_in_cp : 0));
  }
  void clear() { *this = StrategyColumns{}; }
};

class Space {
 public:
  Space(const Model& m, std::vector<Scenario> scenarios, const SpaceFilter& f);
  std::uint64_t size() const { return total_; }
  Candidate at(std::uint64_t index) const;
  const std::vector<Scenario>& scenarios() const { return scenarios_; }
  const Model& model() const { return model_; }
  std::size_t tuples() const { return tuples_.size(); }
  // Every tuple and option list the space enumerates, as text: two spaces with the same signature list the same
  // candidates in the same order (the search checkpoint's fingerprint includes it).
  std::string signature() const;

 private:
  struct Tuple {
    std::size_t scenario;
    int dp, tp, pp, cp, ep, etp;  // etp 0: as tp
    std::uint64_t first;          // global index of its first candidate
    std::vector<std::int64_t> mbs;
    // (virtual-pipeline degree, index into recompute_) pairs swept: block recompute only where it is partial.
    std::vector<std::pair<int, std::uint32_t>> vrc;
    std::uint32_t n_sp;
    // Context-parallel variants swept, (algorithm, Ulysses degree of a2a+p2p): the filter's where cp > 1; empty:
    // one candidate with the settings' algorithm.
    std::vector<std::pair<CpCommType, int>> cpc;
    std::uint32_t n_cpc;
    // Sharding variants swept: all of `sharding_` from `shard0`, or only `shard0` where the data-parallel groups
    // (dp·cp, and the expert one) are single ranks and every variant is the same run.
    std::uint32_t n_shard, shard0;
  };
  Model model_;
  std::vector<Scenario> scenarios_;
  SpaceFilter filter_;
  // The recompute variants: the filter's list, then block recompute of each of its layer counts.
  std::vector<std::pair<Recompute, int>> recompute_;
  // The data-parallel sharding variants swept: (distributed optimizer, FSDP), FSDP only with the optimizer sharded.
  std::vector<std::pair<std::optional<bool>, std::optional<bool>>> sharding_;
  std::vector<Tuple> tuples_;
  std::uint64_t total_ = 0;
};

std::vector<int> divisors(std::int64_t n);

}  // namespace lmsim::search
