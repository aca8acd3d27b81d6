#include "simulator/strategy.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <iterator>
#include <string_view>
#include <vector>

namespace lmsim {

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::none: return "none";
    case Recompute::selective: return "selective";
    case Recompute::full: return "full";
  }
  return "?";
}

const char* to_string(RecomputeMethod m) { return m == RecomputeMethod::block ? "block" : "uniform"; }

const char* to_string(RecomputeModule m) {
  switch (m) {
    case RecomputeModule::core_attn: return "core_attn";
    case RecomputeModule::layernorm: return "layernorm";
    case RecomputeModule::mlp: return "mlp";
    case RecomputeModule::moe_act: return "moe_act";
    case RecomputeModule::moe: return "moe";
    case RecomputeModule::shared_experts: return "shared_experts";
    case RecomputeModule::mla_up_proj: return "mla_up_proj";
    case RecomputeModule::none: return "none";
  }
  return "?";
}

const char* to_string(CpCommType c) {
  switch (c) {
    case CpCommType::p2p: return "p2p";
    case CpCommType::a2a: return "a2a";
    case CpCommType::allgather: return "allgather";
    case CpCommType::a2a_p2p: return "a2a+p2p";
  }
  return "?";
}

const char* to_string(MoeDispatcher d) {
  switch (d) {
    case MoeDispatcher::alltoall: return "alltoall";
    case MoeDispatcher::allgather: return "allgather";
    case MoeDispatcher::flex: return "flex";
  }
  return "?";
}

const char* to_string(AttentionBackend b) {
  switch (b) {
    case AttentionBackend::fused: return "fused";
    case AttentionBackend::flash: return "flash";
  }
  return "?";
}

const char* to_string(Fp8Recipe r) {
  switch (r) {
    case Fp8Recipe::delayed: return "delayed";
    case Fp8Recipe::tensorwise: return "tensorwise";
    case Fp8Recipe::mxfp8: return "mxfp8";
    case Fp8Recipe::blockwise: return "blockwise";
  }
  return "?";
}

const char* to_string(LoraTarget l) {
  switch (l) {
    case LoraTarget::linear_qkv: return "linear_qkv";
    case LoraTarget::linear_proj: return "linear_proj";
    case LoraTarget::linear_fc1: return "linear_fc1";
    case LoraTarget::linear_fc2: return "linear_fc2";
  }
  return "?";
}

std::optional<SettingsProblem> settings_problem(const TrainingSettings& t) {
  auto bad = [](const char* field, std::string why) { return SettingsProblem{field, std::move(why)}; };
  if (t.seq_length <= 0 || t.seq_length > (1LL << 24)) return bad("seq_length", "seq_length must be in [1, 16777216]");
  if (t.global_batch_size <= 0 || t.global_batch_size > (1LL << 30))
    return bad("global_batch_size", "global_batch_size must be positive");
  if (t.micro_batch_size <= 0 || t.micro_batch_size > t.global_batch_size)
    return bad("micro_batch_size", "micro_batch_size must be in [1, global_batch_size]");
  if (!(t.moe_load_imbalance >= 1.0 && t.moe_load_imbalance <= 64.0))
    return bad("moe_load_imbalance", "moe_load_imbalance must be in [1, 64]");
  if (!(t.moe_expert_capacity_factor == 0 ||
        (t.moe_expert_capacity_factor >= 0.01 && t.moe_expert_capacity_factor <= 64)))
    return bad("moe_expert_capacity_factor", "moe_expert_capacity_factor must be 0 (dropless) or in [0.01, 64]");
  if (t.moe_pad_expert_input_to_capacity && t.moe_expert_capacity_factor == 0)
    return bad("moe_pad_expert_input_to_capacity",
               "moe_pad_expert_input_to_capacity needs a moe_expert_capacity_factor (Megatron-core asserts it)");
  if (t.moe_expert_capacity_factor > 0 && t.moe_token_dispatcher_type == MoeDispatcher::flex)
    return bad("moe_expert_capacity_factor",
               "token dropping is modelled for the alltoall and allgather dispatchers only, not flex");
  if (t.reuse_fp32_param && t.precision == Precision::fp16)
    return bad("reuse_fp32_param", "reuse_fp32_param needs bf16 parameters (precision bf16, fp8 or fp4)");
  if (t.reuse_fp32_param && t.bf16_optimizer_state)
    return bad("reuse_fp32_param", "reuse_fp32_param keeps an fp32 master copy; bf16_optimizer_state has none");
  if (t.bf16_adam_moments && t.bf16_optimizer_state)
    return bad("bf16_adam_moments",
               "bf16_adam_moments keeps bf16 moments beside an fp32 master copy; bf16_optimizer_state has no master "
               "copy (choose one)");
  if (t.fp8_param_gather && !quantizes_linear(t.precision))
    return bad("fp8_param_gather", "fp8_param_gather needs precision fp8 or fp4");
  if (t.fp8_param_gather && t.reuse_fp32_param)
    return bad("fp8_param_gather", "fp8_param_gather keeps FP8 (FP4) parameters; reuse_fp32_param needs bf16 ones");
  if (t.fsdp && !t.distributed_optimizer)
    return bad("fsdp", "fsdp shards the optimizer state too: distributed_optimizer false contradicts it");
  if (t.recompute_modules >= (1u << kNumRecomputeModules))
    return bad("recompute_modules", "recompute_modules holds an unknown module");
  if (t.document_tokens < 0) return bad("document_tokens", "document_tokens must be >= 0 (0: one document a sequence)");
  if (t.document_tokens > 0 && !t.flash_attention)
    return bad("document_tokens",
               "packed documents need flash attention: Megatron-core runs them through the fused kernel's "
               "variable-length (THD) form");
  if (t.lora_rank < 0) return bad("lora_rank", "lora_rank must be >= 0 (0: full training)");
  if (t.lora() && (t.lora_target_modules == 0 || t.lora_target_modules > kAllLoraTargets))
    return bad("lora_target_modules",
               "lora_target_modules must name at least one of " + names_of<LoraTarget>(kNumLoraTargets));
  if (t.lora() && t.fsdp)
    return bad("lora_rank", "LoRA under fsdp is not modelled: its frozen base would be sharded and gathered too");
  if (t.num_layers_at_start_in_bf16 < 0 || t.num_layers_at_end_in_bf16 < 0)
    return bad("num_layers_at_start_in_bf16", "num_layers_at_start_in_bf16 and num_layers_at_end_in_bf16 must be >= 0");
  if (t.runs_bf16_ends() && t.precision == Precision::fp8 && t.fp8_recipe == Fp8Recipe::delayed)
    return bad("first_last_layers_bf16",
               "first and last layers in BF16 need fp8_recipe tensorwise, mxfp8 or blockwise: Megatron-core refuses "
               "them under delayed scaling");
  return std::nullopt;
}

std::string validate(const TrainingSettings& t) {
  const auto p = settings_problem(t);
  return p ? p->why : std::string();
}

std::string config_name(const Strategy& s) {
  std::string n = "dp" + std::to_string(s.data_parallel) + "-tp" + std::to_string(s.tensor_parallel) + "-pp" +
                  std::to_string(s.pipeline_parallel) + "-cp" + std::to_string(s.context_parallel);
  if (s.expert_parallel != 1) n += "-ep" + std::to_string(s.expert_parallel);
  if (s.expert_tensor_parallel > 0) n += "-etp" + std::to_string(s.expert_tensor_parallel);
  n += s.recompute == Recompute::full ? "-RC" : s.recompute == Recompute::selective ? "-selRC" : "-noRC";
  if (s.recompute_num_layers > 0)
    n += std::string("-") + to_string(s.recompute_method) + std::to_string(s.recompute_num_layers);
  if (s.micro_batch_size != 0) n += "-mbs" + std::to_string(s.micro_batch_size);
  if (s.virtual_pipeline != 1) n += "-vpp" + std::to_string(s.virtual_pipeline);
  if (s.first_stage_layers > 0) n += "-first" + std::to_string(s.first_stage_layers);
  if (s.last_stage_layers > 0) n += "-last" + std::to_string(s.last_stage_layers);
  if (s.sequence_parallel) n += *s.sequence_parallel ? "-sp" : "-nosp";
  if (s.distributed_optimizer) n += *s.distributed_optimizer ? "-do" : "-nodo";
  if (s.fsdp) n += *s.fsdp ? "-fsdp" : "-nofsdp";
  if (s.cp_comm_type) n += std::string("-") + to_string(*s.cp_comm_type);
  if (s.ulysses_degree > 0) n += "-uly" + std::to_string(s.ulysses_degree);
  return n;
}

namespace {

constexpr long long kMaxNameDegree = 1LL << 20;  // a degree in a configuration name; devices() is checked apart

// Parses `<prefix><positive integer>` with no sign, no leading zero and no trailing characters.
std::optional<long long> degree(std::string_view tok, std::string_view prefix) {
  if (tok.size() <= prefix.size() || tok.substr(0, prefix.size()) != prefix) return std::nullopt;
  std::string_view digits = tok.substr(prefix.size());
  if (digits[0] == '0') return std::nullopt;
  long long v = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec != std::errc() || p != digits.data() + digits.size() || v <= 0 || v > kMaxNameDegree) return std::nullopt;
  return v;
}

// The degrees a strategy spec leads with, in its order (a configuration name's first four, then ep and etp).
constexpr std::string_view kLeadDegrees[] = {"dp", "tp", "pp", "cp", "ep", "etp"};

// The extension tokens after the recompute field, by their place in the canonical order (0: not one), with the
// value each carries (a degree, on/off, or the context-parallel algorithm).
enum ExtensionKind { kNone, kRcLayers, kMbs, kVpp, kFirst, kLast, kSp, kDo, kFsdp, kCpAlgo, kUly };
struct ExtensionToken {
  int kind = kNone;
  long long value = 0;
};
// The extension tokens that carry a degree: the recompute method and layer count (the value's sign tells them apart:
// block positive, uniform negative), then the others.
constexpr std::pair<int, std::string_view> kExtensionDegrees[] = {
    {kRcLayers, "block"}, {-kRcLayers, "uniform"}, {kMbs, "mbs"}, {kVpp, "vpp"},
    {kFirst, "first"},    {kLast, "last"},         {kUly, "uly"}};
ExtensionToken extension_token(std::string_view t) {
  for (const auto& [kind, prefix] : kExtensionDegrees)
    if (auto v = degree(t, prefix)) return kind < 0 ? ExtensionToken{-kind, -*v} : ExtensionToken{kind, *v};
  if (t == "sp" || t == "nosp") return {kSp, t == "sp"};
  if (t == "do" || t == "nodo") return {kDo, t == "do"};
  if (t == "fsdp" || t == "nofsdp") return {kFsdp, t == "fsdp"};
  if (auto c = from_name<CpCommType>(t, kNumCpCommTypes)) return {kCpAlgo, static_cast<long long>(*c)};
  return {};
}

// A field that names a numbered setting but whose number is not one a name may carry (`mbs0`, `vpp01`, `dp1e3`):
// what it should be, else empty (not a numbered field at all).
std::string bad_number(std::string_view t) {
  auto names = [&](std::string_view prefix) {  // the prefix and a digit after it (`dpx`: not this field)
    return t.size() > prefix.size() && t.substr(0, prefix.size()) == prefix && t[prefix.size()] >= '0' &&
           t[prefix.size()] <= '9';
  };
  auto why = [&](std::string_view prefix) {
    return "field '" + std::string(t) + "': " + std::string(prefix) + " takes a whole number from 1 to " +
           std::to_string(kMaxNameDegree) + ", written without leading zeros";
  };
  for (const std::string_view prefix : kLeadDegrees)
    if (names(prefix)) return why(prefix);
  for (const auto& e : kExtensionDegrees)
    if (names(e.second)) return why(e.second);
  return {};
}

}  // namespace

namespace {
// The dash-separated fields of a name (an empty one where two dashes meet or one ends it).
std::vector<std::string_view> name_fields(std::string_view rest) {
  std::vector<std::string_view> toks;
  while (true) {
    auto pos = rest.find('-');
    toks.push_back(rest.substr(0, pos));
    if (pos == std::string_view::npos) break;
    rest.remove_prefix(pos + 1);
  }
  return toks;
}
}  // namespace

ParseResult parse_config_name(const std::string& name) {
  ParseResult r;
  const std::vector<std::string_view> toks = name_fields(name);
  auto fail = [&](const std::string& why) {
    r.error = "configuration '" + name + "': " + why;
    return r;
  };
  if (toks.size() < 5) return fail("expected dp<d>-tp<t>-pp<p>-cp<c>[-ep<e>]-<RC|noRC|selRC>");
  Strategy s;
  const char* prefixes[4] = {"dp", "tp", "pp", "cp"};
  int* fields[4] = {&s.data_parallel, &s.tensor_parallel, &s.pipeline_parallel, &s.context_parallel};
  for (int i = 0; i < 4; ++i) {
    auto v = degree(toks[static_cast<std::size_t>(i)], prefixes[i]);
    if (!v)
      return fail("field " + std::to_string(i + 1) + " '" + std::string(toks[static_cast<std::size_t>(i)]) +
                  "' is not " + prefixes[i] + "<positive integer> (at most " + std::to_string(kMaxNameDegree) + ")");
    *fields[i] = static_cast<int>(*v);
  }
  std::size_t i = 4;
  if (auto v = degree(toks[i], "ep")) {
    // ep1 is accepted as the dataset writes it for an MoE model run without expert parallelism (LM-SimBench lists
    // Qwen3-30B-A3B's EP degree as 1); config_name() omits it.
    s.expert_parallel = static_cast<int>(*v);
    ++i;
  }
  if (i < toks.size()) {
    if (auto v = degree(toks[i], "etp")) {
      if (*v == s.tensor_parallel) return fail("etp equal to tp is written by omitting the etp field");
      s.expert_tensor_parallel = static_cast<int>(*v);
      ++i;
    }
  }
  if (i >= toks.size()) return fail("missing recompute field (RC, noRC or selRC)");
  if (toks[i] == "RC")
    s.recompute = Recompute::full;
  else if (toks[i] == "noRC")
    s.recompute = Recompute::none;
  else if (toks[i] == "selRC")
    s.recompute = Recompute::selective;
  else
    return fail("recompute field '" + std::string(toks[i]) + "' is not RC, noRC or selRC");
  ++i;
  // Extension tokens, each at most once, in canonical order.
  int stage = 0;
  for (; i < toks.size(); ++i) {
    const std::string_view t = toks[i];
    const ExtensionToken e = extension_token(t);
    const bool in_order =
        e.kind > stage && (e.kind != kUly || (stage == kCpAlgo && s.cp_comm_type == CpCommType::a2a_p2p));
    if (const std::string why = e.kind ? std::string() : bad_number(t); !why.empty()) return fail(why);
    if (!in_order)
      return fail((e.kind ? "field '" + std::string(t) + "' is repeated or out of order"
                          : "unknown field '" + std::string(t) + "'") +
                  "; extension tokens, each at most once, go in this order: -block<N>|-uniform<N> (after RC) -mbs<N> "
                  "-vpp<N> -first<N> -last<N> "
                  "-sp|-nosp -do|-nodo -fsdp|-nofsdp -p2p|-a2a|-allgather|-a2a+p2p -uly<N> (after -a2a+p2p)");
    switch (e.kind) {
      case kRcLayers:
        if (s.recompute != Recompute::full)
          return fail("'" + std::string(t) + "' names a full-recompute method; the recompute field is not RC");
        if (e.value == -1) return fail("uniform1 is written by omitting the field (RC alone)");
        s.recompute_method = e.value > 0 ? RecomputeMethod::block : RecomputeMethod::uniform;
        s.recompute_num_layers = static_cast<int>(e.value > 0 ? e.value : -e.value);
        break;
      case kMbs: s.micro_batch_size = e.value; break;
      case kVpp:
        if (e.value == 1) return fail("vpp1 is written by omitting the vpp field");
        s.virtual_pipeline = static_cast<int>(e.value);
        break;
      case kFirst: s.first_stage_layers = static_cast<int>(e.value); break;
      case kLast: s.last_stage_layers = static_cast<int>(e.value); break;
      case kSp: s.sequence_parallel = e.value != 0; break;
      case kDo: s.distributed_optimizer = e.value != 0; break;
      case kFsdp:
        if (e.value && s.distributed_optimizer == false)
          return fail("'fsdp' shards the optimizer state: not with 'nodo'");
        s.fsdp = e.value != 0;
        break;
      case kCpAlgo:
        if (s.context_parallel == 1)
          return fail("'" + std::string(t) + "' names a context-parallel algorithm; cp is 1");
        s.cp_comm_type = static_cast<CpCommType>(e.value);
        break;
      default:  // kUly
        if (!valid_ulysses_degree_in_cp(e.value, s.context_parallel))
          return fail("'" + std::string(t) + "': the Ulysses degree must be above 1, below cp and divide it");
        s.ulysses_degree = static_cast<int>(e.value);
        break;
    }
    stage = e.kind;
  }
  r.strategy = s;
  return r;
}

ParseResult parse_strategy_spec(const std::string& spec, std::int64_t devices) {
  ParseResult r;
  auto fail = [&](const std::string& why) {
    r.error = "strategy '" + spec + "': " + why;
    return r;
  };
  auto quoted = [](std::string_view v) {  // appended, not prepended to: GCC 12's -Wrestrict misreads the latter
    std::string q(1, '\'');
    q.append(v);
    q += '\'';
    return q;
  };
  // The degrees a name leads with, in its order; dp may be left to the device count, the others default to 1 (ep
  // and etp: none).
  const auto& prefixes = kLeadDegrees;
  std::array<std::optional<long long>, std::size(kLeadDegrees)> degrees{};
  // The recompute field as a name writes it, or as Megatron's --recompute-granularity values (and `none`) say it.
  constexpr std::pair<std::string_view, std::string_view> recompute_spellings[] = {
      {"RC", "RC"}, {"noRC", "noRC"}, {"selRC", "selRC"}, {"full", "RC"}, {"selective", "selRC"}, {"none", "noRC"}};
  std::string_view recompute, recompute_typed;
  std::vector<std::pair<int, std::string_view>> extensions;  // by their place in the canonical order
  for (const std::string_view tok : name_fields(spec)) {
    if (tok.empty()) return fail("an empty field (two dashes in a row, or one at an end)");
    std::optional<long long> value;
    std::size_t d = 0;
    while (d < std::size(prefixes) && !(value = degree(tok, prefixes[d]))) ++d;
    if (value) {
      if (degrees[d]) return fail(quoted(prefixes[d]) + " is given twice");
      degrees[d] = value;
      continue;
    }
    const auto spelled = std::find_if(std::begin(recompute_spellings), std::end(recompute_spellings),
                                      [&](const auto& r) { return r.first == tok; });
    if (spelled != std::end(recompute_spellings)) {
      if (!recompute.empty()) return fail("two recompute fields, " + quoted(recompute_typed) + " and " + quoted(tok));
      recompute = spelled->second;
      recompute_typed = tok;
      continue;
    }
    const ExtensionToken e = extension_token(tok);
    if (const std::string why = e.kind == kNone ? bad_number(tok) : std::string(); !why.empty()) return fail(why);
    if (e.kind == kNone)
      return fail("unknown field " + quoted(tok) +
                  "; fields: dp<N> tp<N> pp<N> cp<N> ep<N> etp<N>, RC|noRC|selRC (or full|selective|none), "
                  "block<N>|uniform<N>, mbs<N>, "
                  "vpp<N>, first<N>, last<N>, sp|nosp, do|nodo, fsdp|nofsdp, p2p|a2a|allgather|a2a+p2p, uly<N>");
    for (const auto& [kind, other] : extensions)
      if (kind == e.kind) return fail(quoted(other) + " and " + quoted(tok) + " set the same thing");
    extensions.emplace_back(e.kind, tok);
  }
  const bool ulysses = std::any_of(extensions.begin(), extensions.end(), [](const auto& e) { return e.first == kUly; });
  const bool hybrid =
      std::any_of(extensions.begin(), extensions.end(), [](const auto& e) { return e.second == "a2a+p2p"; });
  if (ulysses && !hybrid) return fail("a Ulysses degree (uly<N>) is a2a+p2p's: give a2a+p2p too");
  const long long tp = degrees[1].value_or(1), pp = degrees[2].value_or(1), cp = degrees[3].value_or(1);
  long long dp = 0;
  if (degrees[0]) {
    dp = *degrees[0];
  } else if (devices <= 0) {
    return fail("no dp<N>: give it, or the device count (--devices) it follows from");
  } else if (devices % (tp * pp * cp) != 0) {  // each degree is at most 2^20: the product fits
    return fail("no dp<N>, and " + std::to_string(devices) +
                " devices are not a multiple of tp*pp*cp = " + std::to_string(tp * pp * cp));
  } else {
    dp = devices / (tp * pp * cp);
  }
  std::string name =
      "dp" + std::to_string(dp) + "-tp" + std::to_string(tp) + "-pp" + std::to_string(pp) + "-cp" + std::to_string(cp);
  if (degrees[4]) name += "-ep" + std::to_string(*degrees[4]);
  if (degrees[5]) name += "-etp" + std::to_string(*degrees[5]);
  name += '-';
  name += recompute.empty() ? std::string_view("noRC") : recompute;
  std::stable_sort(extensions.begin(), extensions.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [kind, tok] : extensions) {
    name += '-';
    name += tok;
  }
  r = parse_config_name(name);
  if (!r.strategy && name != spec) r.error = "strategy '" + spec + "', read as '" + name + "': " + r.error;
  return r;
}

ResolvedStrategy resolve(const Strategy& s, const TrainingSettings& t) {
  ResolvedStrategy r{
      s,
      s.micro_batch_size > 0 ? s.micro_batch_size : t.micro_batch_size,
      0,
      s.sequence_parallel.value_or(t.sequence_parallel) && s.tensor_parallel > 1,
      s.distributed_optimizer.value_or(t.distributed_optimizer) || s.fsdp.value_or(t.fsdp),
      s.fsdp.value_or(t.fsdp),
      s.cp_comm_type.value_or(t.cp_comm_type),
      s.ulysses_degree > 0 ? s.ulysses_degree : t.ulysses_degree_in_cp,
      t.microbatch_group_size_per_vp_stage > 0 ? t.microbatch_group_size_per_vp_stage : s.pipeline_parallel,
      false,
      false,
      false,
      false,
      false,
      false};
  // Over one-rank data-parallel groups the distributed optimizer shards nothing, so FP8 parameters run there
  // whatever the strategy says of it (--emit then names the optimizer).
  const bool one_rank_dp = one_rank_data_parallel(s.data_parallel, s.tensor_parallel, s.context_parallel,
                                                  s.expert_tensor(), s.expert_parallel);
  r.fp8_param_gather = t.fp8_param_gather && quantizes_linear(t.precision) && (r.distributed_optimizer || one_rank_dp);
  r.data_parallel_group = !one_rank_dp;
  r.moe_a2a_overlap = t.overlap_moe_expert_parallel_comm && s.expert_parallel > 1 &&
                      t.moe_token_dispatcher_type != MoeDispatcher::allgather && s.recompute != Recompute::full &&
                      !(s.recompute == Recompute::selective && t.recomputes(RecomputeModule::moe)) &&
                      (s.pipeline_parallel == 1 || s.virtual_pipeline > 1);
  r.tp_comm_overlap = t.tp_comm_overlap && s.tensor_parallel > 1 && r.sequence_parallel;
  r.synchronous_tp_allreduce =
      !t.async_tensor_model_parallel_allreduce && s.tensor_parallel > 1 && !r.sequence_parallel;
  r.distribute_saved_activations =
      t.distribute_saved_activations && s.recompute == Recompute::full && s.tensor_parallel > 1 && !r.sequence_parallel;
  const std::int64_t per_step = static_cast<std::int64_t>(s.data_parallel) * r.micro_batch_size;
  r.num_micro_batches = per_step > 0 ? t.global_batch_size / per_step : 0;
  return r;
}

const char* to_string(Rejection r) {
  switch (r) {
    case Rejection::ok: return "ok";
    case Rejection::heads_not_divisible_by_tp: return "heads_not_divisible_by_tp";
    case Rejection::kv_heads_not_divisible_by_tp: return "kv_heads_not_divisible_by_tp";
    case Rejection::layers_not_divisible_by_pp_vpp: return "layers_not_divisible_by_pp_vpp";
    case Rejection::sequence_not_divisible_by_cp: return "sequence_not_divisible_by_2cp";
    case Rejection::sequence_not_divisible_by_tp: return "sequence_not_divisible_by_tp_under_sp";
    case Rejection::experts_not_divisible_by_ep: return "experts_not_divisible_by_ep";
    case Rejection::ep_not_dividing_dp_cp: return "ep_not_dividing_dp_cp";
    case Rejection::ep_without_experts: return "ep_without_experts";
    case Rejection::batch_not_divisible: return "global_batch_not_divisible_by_dp_mbs";
    case Rejection::vpp_needs_pipeline: return "vpp_needs_pp_and_microbatches";
    case Rejection::tp_crosses_node: return "tp_crosses_node";
    case Rejection::cp_needs_flash_attention: return "cp_needs_flash_attention";
    case Rejection::precision_unsupported: return "precision_unsupported";
    case Rejection::degree_out_of_range: return "degree_out_of_range";
    case Rejection::heads_not_divisible_by_tp_cp: return "heads_not_divisible_by_tp_cp";
    case Rejection::cp_hierarchy_invalid: return "cp_hierarchy_invalid";
    case Rejection::recompute_layers_invalid: return "recompute_layers_invalid";
    case Rejection::bf16_layers_exceed_stage: return "bf16_layers_exceed_stage";
    case Rejection::flex_dispatcher_unsupported: return "flex_dispatcher_unsupported";
    case Rejection::count_: break;
  }
  return "?";
}

const char* describe(Rejection r) {
  switch (r) {
    case Rejection::ok: return "valid";
    case Rejection::heads_not_divisible_by_tp: return "attention heads are not divisible by tensor_parallel";
    case Rejection::kv_heads_not_divisible_by_tp: return "KV heads are not divisible by tensor_parallel";
    case Rejection::layers_not_divisible_by_pp_vpp:
      return "layers are not divisible by pipeline_parallel x virtual_pipeline";
    case Rejection::sequence_not_divisible_by_cp:
      return "sequence length is not divisible by 2 x context_parallel (context_parallel with cp_comm_type a2a)";
    case Rejection::sequence_not_divisible_by_tp:
      return "sequence length / context_parallel is not divisible by tensor_parallel (sequence parallel)";
    case Rejection::experts_not_divisible_by_ep: return "experts are not divisible by expert_parallel";
    case Rejection::ep_not_dividing_dp_cp:
      return "expert_parallel x expert_tensor_parallel does not divide tensor_parallel x context_parallel x "
             "data_parallel";
    case Rejection::ep_without_experts: return "expert_parallel > 1 or expert_tensor_parallel on a dense model";
    case Rejection::batch_not_divisible: return "global batch is not divisible by data_parallel x micro_batch_size";
    case Rejection::vpp_needs_pipeline:
      return "virtual pipeline needs pipeline_parallel > 1 and micro-batches divisible by pipeline_parallel (or, "
             "with microbatch_group_size_per_vp_stage N in [pipeline_parallel, micro-batches], their remainder "
             "mod N zero or at least pipeline_parallel)";
    case Rejection::tp_crosses_node: return "tensor-parallel group crosses a node boundary";
    case Rejection::precision_unsupported:
      return "the system has no dense throughput in this precision, or no MXFP8 tensor cores for fp8_recipe mxfp8";
    case Rejection::cp_needs_flash_attention:
      return "context parallelism by ring or K/V all-gather (cp_comm_type p2p, allgather) needs flash attention; the "
             "settings store s x s scores";
    case Rejection::degree_out_of_range: return "a parallel degree is outside [1, 65536] or pp > 128";
    case Rejection::heads_not_divisible_by_tp_cp:
      return "attention heads are not divisible by tensor_parallel x context_parallel (all-to-all context "
             "parallelism splits the heads over both)";
    case Rejection::cp_hierarchy_invalid:
      return "cp_comm_type a2a+p2p needs ulysses_degree_in_cp above 1, below context_parallel and dividing it";
    case Rejection::recompute_layers_invalid:
      return "recompute_num_layers needs full recompute (RC) and a count its method takes: block 1 or more, uniform "
             "2 or more (uniform 1, Megatron's default, is written as 0)";
    case Rejection::flex_dispatcher_unsupported:
      return "the flex MoE dispatcher (DeepEP / HybridEP) needs expert_parallel x expert_tensor_parallel above 1 and "
             "an NVIDIA GPU (a system with sm_count)";
    case Rejection::bf16_layers_exceed_stage:
      return "num_layers_at_start_in_bf16 and num_layers_at_end_in_bf16 (first_last_layers_bf16) must not exceed "
             "num_layers / pipeline_parallel (Megatron-core refuses more)";
    case Rejection::count_: break;
  }
  return "?";
}

const char* to_string(SplitKind k) {
  switch (k) {
    case SplitKind::even: return "even";
    case SplitKind::embedding_loss: return "embedding_loss";
    case SplitKind::explicit_layers: return "explicit";
    case SplitKind::uneven: return "uneven";
  }
  return "?";
}

std::optional<PipelineSplit> pipeline_split(const Model& m, const Strategy& s, bool allow_uneven_layers) {
  PipelineSplit p;
  const std::int64_t L = m.num_layers, C = static_cast<std::int64_t>(s.pipeline_parallel) * s.virtual_pipeline;
  p.chunks = C;
  if (s.first_stage_layers > 0 || s.last_stage_layers > 0) {
    if (C < 2 || s.first_stage_layers <= 0 || s.last_stage_layers <= 0) return std::nullopt;
    const std::int64_t rest = L - s.first_stage_layers - s.last_stage_layers;
    if (rest < 0 || (C > 2 && rest % (C - 2) != 0) || (C == 2 && rest != 0)) return std::nullopt;
    p.kind = SplitKind::explicit_layers;
    p.first = s.first_stage_layers;
    p.last = s.last_stage_layers;
    p.middle = C > 2 ? rest / (C - 2) : 0;
    return p;
  }
  if (L % C == 0) {
    p.first = p.middle = p.last = L / C;
    return p;
  }
  const std::int64_t slots = embedding_loss_slots(m);
  // A first or last chunk may be left with the embedding, or the MTP module and the loss, alone.
  if (C > 1 && slots % C == 0 && slots / C >= 1 + m.mtp_layers) {
    p.kind = SplitKind::embedding_loss;
    p.middle = slots / C;
    p.first = p.middle - 1;
    p.last = p.middle - 1 - m.mtp_layers;
    return p;
  }
  if (allow_uneven_layers && s.virtual_pipeline == 1 && L >= C) {
    p.kind = SplitKind::uneven;
    p.first = L / C + (L % C > 0 ? 1 : 0);
    p.middle = L / C;
    p.last = L / C;
    return p;
  }
  return std::nullopt;
}

Rejection check(const Model& m, const Strategy& s, const TrainingSettings& t, const ValidityOptions& o) {
  const int degrees[7] = {s.data_parallel,   s.tensor_parallel, s.pipeline_parallel, s.context_parallel,
                          s.expert_parallel, s.expert_tensor(), s.virtual_pipeline};
  for (int d : degrees)
    if (d < 1 || d > 65536) return Rejection::degree_out_of_range;
  if (s.pipeline_parallel > 128 || s.micro_batch_size < 0) return Rejection::degree_out_of_range;
  const ResolvedStrategy r = resolve(s, t);
  if (!o.allow_padded_heads) {
    if (m.num_attention_heads % s.tensor_parallel != 0) return Rejection::heads_not_divisible_by_tp;
    if (!m.is_mla() && m.num_kv_heads % s.tensor_parallel != 0) return Rejection::kv_heads_not_divisible_by_tp;
  }
  if (s.first_stage_layers < 0 || s.last_stage_layers < 0) return Rejection::degree_out_of_range;
  if (s.recompute_num_layers < 0 || (s.recompute_num_layers > 0 && s.recompute != Recompute::full) ||
      (s.recompute_method == RecomputeMethod::uniform && s.recompute_num_layers == 1) ||
      (s.recompute_method == RecomputeMethod::block && s.recompute_num_layers == 0))
    return Rejection::recompute_layers_invalid;
  if (!pipeline_split(m, s, o.allow_uneven_layers)) return Rejection::layers_not_divisible_by_pp_vpp;
  const std::int64_t stage_layers = m.num_layers / s.pipeline_parallel;  // Megatron-core's bound on either count
  if (t.bf16_layers_at_start() > stage_layers || t.bf16_layers_at_end() > stage_layers)
    return Rejection::bf16_layers_exceed_stage;
  // Ring and all-gather context parallelism run flash attention over load-balanced halves (2·cp chunks of the
  // sequence); all-to-all (Ulysses) runs any attention over the whole sequence for a share of the heads.
  const bool a2a = r.cp_comm_type == CpCommType::a2a;
  const std::int64_t cp = s.context_parallel, uly = ulysses_degree(r.cp_comm_type, r.ulysses_degree_in_cp, cp);
  if (cp > 1 && r.cp_comm_type == CpCommType::a2a_p2p && !valid_ulysses_degree_in_cp(r.ulysses_degree_in_cp, cp))
    return Rejection::cp_hierarchy_invalid;
  if (cp > 1 && !a2a && !t.flash_in(s.context_parallel)) return Rejection::cp_needs_flash_attention;
  if (t.seq_length % (cp > 1 && !a2a ? 2 * cp : cp) != 0) return Rejection::sequence_not_divisible_by_cp;
  if (uly > 1 && !o.allow_padded_heads && m.num_attention_heads % (s.tensor_parallel * uly) != 0)
    return Rejection::heads_not_divisible_by_tp_cp;
  if (r.sequence_parallel && (t.seq_length / s.context_parallel) % s.tensor_parallel != 0)
    return Rejection::sequence_not_divisible_by_tp;
  if ((s.expert_parallel > 1 || s.expert_tensor_parallel > 0) && !m.is_moe()) return Rejection::ep_without_experts;
  if (m.is_moe() && m.num_experts % s.expert_parallel != 0) return Rejection::experts_not_divisible_by_ep;
  // The experts of a stage fold over its tp·cp·dp ranks (Megatron-core's expert rank generator: etp, ep, edp).
  const std::int64_t stage_ranks = static_cast<std::int64_t>(s.tensor_parallel) * s.context_parallel * s.data_parallel;
  if (stage_ranks % (static_cast<std::int64_t>(s.expert_parallel) * s.expert_tensor()) != 0)
    return Rejection::ep_not_dividing_dp_cp;
  // Megatron-core's MoEFlexTokenDispatcher asserts tp x ep > 1 over its expert-TP x EP group.
  if (m.is_moe() && t.moe_token_dispatcher_type == MoeDispatcher::flex && s.expert_parallel * s.expert_tensor() <= 1)
    return Rejection::flex_dispatcher_unsupported;
  if (t.global_batch_size % (static_cast<std::int64_t>(s.data_parallel) * r.micro_batch_size) != 0)
    return Rejection::batch_not_divisible;
  // Megatron-core's interleaved schedule (schedules.py): groups of N micro-batches per virtual stage, N in
  // [p, m], the last group whole or at least p long; N = p by default, so m divisible by p.
  if (s.virtual_pipeline > 1) {
    const std::int64_t m = r.num_micro_batches, n = r.vp_group, rest = m % n;
    if (s.pipeline_parallel == 1 || n < s.pipeline_parallel || n > m || (rest > 0 && rest < s.pipeline_parallel))
      return Rejection::vpp_needs_pipeline;
  }
  if (!o.allow_cross_node_tp && s.tensor_parallel > o.devices_per_node) return Rejection::tp_crosses_node;
  return Rejection::ok;
}

namespace {
std::string n(std::int64_t v) { return std::to_string(v); }

// The values in [1, limit] of one degree of `s` (`field`) that split the model's layers, listed "1, 2, 4 or 8";
// "none" if none.
std::string splitting_degrees(const Model& m, const Strategy& s, int Strategy::*field, std::int64_t limit,
                              const ValidityOptions& o) {
  std::vector<std::int64_t> ok;
  Strategy x = s;
  for (std::int64_t d = 1; d <= limit; ++d) {
    x.*field = static_cast<int>(d);
    if (pipeline_split(m, x, o.allow_uneven_layers)) ok.push_back(d);
  }
  if (ok.empty()) return "none";
  std::string out;
  for (std::size_t i = 0; i < ok.size(); ++i) out += (i == 0 ? "" : i + 1 == ok.size() ? " or " : ", ") + n(ok[i]);
  return out;
}
}  // namespace

std::string explain(Rejection why, const Model& m, const Strategy& s, const TrainingSettings& t,
                    const ValidityOptions& o) {
  const std::int64_t tp = s.tensor_parallel, pp = s.pipeline_parallel, cp = s.context_parallel,
                     vpp = s.virtual_pipeline, ep = s.expert_parallel, etp = s.expert_tensor();
  const ResolvedStrategy r = resolve(s, t);
  std::string d;
  switch (why) {
    case Rejection::ok:
    case Rejection::cp_needs_flash_attention:
    case Rejection::count_: break;
    case Rejection::heads_not_divisible_by_tp: d = n(m.num_attention_heads) + " heads, tp " + n(tp); break;
    case Rejection::kv_heads_not_divisible_by_tp: d = n(m.num_kv_heads) + " KV heads, tp " + n(tp); break;
    case Rejection::layers_not_divisible_by_pp_vpp: {
      d = n(m.num_layers) + " layers" + (m.mtp_layers > 0 ? " + " + n(m.mtp_layers) + " MTP" : std::string()) +
          " over pp " + n(pp) + " x vpp " + n(vpp) + " = " + n(pp * vpp) + " chunks";
      const std::int64_t most = embedding_loss_slots(m);  // no split has more chunks than these
      if (pp < 1 || vpp < 1) {
        // degrees out of range: no split to list
      } else if (s.first_stage_layers > 0 || s.last_stage_layers > 0) {
        d += ", first " + n(s.first_stage_layers) + " and last " + n(s.last_stage_layers) +
             " layers, the rest split evenly over the middle chunks";
      } else if (vpp > 1) {
        d += "; with pp " + n(pp) + ", vpp " +
             splitting_degrees(m, s, &Strategy::virtual_pipeline, std::min<std::int64_t>(most, 64), o) + " splits them";
      } else {
        d += "; pp " + splitting_degrees(m, s, &Strategy::pipeline_parallel, std::min<std::int64_t>(most, 128), o) +
             " splits them";
      }
      break;
    }
    case Rejection::sequence_not_divisible_by_cp:
      d = "seq " + n(t.seq_length) + ", cp " + n(cp) +
          (r.cp_comm_type == CpCommType::a2a ? std::string() : ": needs a multiple of " + n(2 * cp));
      break;
    case Rejection::sequence_not_divisible_by_tp:
      d = "seq " + n(t.seq_length) + " / cp " + n(cp) + (cp > 0 ? " = " + n(t.seq_length / cp) : std::string()) +
          ", tp " + n(tp);
      break;
    case Rejection::experts_not_divisible_by_ep: d = n(m.num_experts) + " experts, ep " + n(ep); break;
    case Rejection::ep_not_dividing_dp_cp:
      d = "ep " + n(ep) + " x etp " + n(etp) + " = " + n(ep * etp) + " against tp " + n(tp) + " x cp " + n(cp) +
          " x dp " + n(s.data_parallel) + " = " + n(tp * cp * s.data_parallel);
      break;
    case Rejection::ep_without_experts: d = m.name + " has no experts"; break;
    case Rejection::batch_not_divisible:
      d = "global batch " + n(t.global_batch_size) + ", dp " + n(s.data_parallel) + " x micro-batch " +
          n(r.micro_batch_size) + " = " + n(s.data_parallel * r.micro_batch_size);
      break;
    case Rejection::vpp_needs_pipeline:
      d = "pp " + n(pp) + ", " + n(r.num_micro_batches) + " micro-batches, groups of " + n(r.vp_group);
      break;
    case Rejection::tp_crosses_node: d = "tp " + n(tp) + ", " + n(o.devices_per_node) + " devices per node"; break;
    case Rejection::precision_unsupported:
      d = std::string("precision ") + to_string(t.precision) +
          (t.precision == Precision::fp8 ? std::string(", fp8_recipe ") + to_string(t.fp8_recipe) : "");
      break;
    case Rejection::degree_out_of_range:
      d = "dp " + n(s.data_parallel) + ", tp " + n(tp) + ", pp " + n(pp) + ", cp " + n(cp) + ", ep " + n(ep) +
          ", etp " + n(etp) + ", vpp " + n(vpp);
      break;
    case Rejection::heads_not_divisible_by_tp_cp:
      d = n(m.num_attention_heads) + " heads, tp " + n(tp) + " x Ulysses degree " +
          n(ulysses_degree(r.cp_comm_type, r.ulysses_degree_in_cp, cp));
      break;
    case Rejection::cp_hierarchy_invalid:
      d = "ulysses_degree_in_cp " + n(r.ulysses_degree_in_cp) + ", cp " + n(cp);
      break;
    case Rejection::recompute_layers_invalid:
      d = std::string("recompute ") + (s.recompute == Recompute::full ? "full" : "not full") + ", method " +
          to_string(s.recompute_method) + ", " + n(s.recompute_num_layers) + " layers";
      break;
    case Rejection::flex_dispatcher_unsupported: d = "ep " + n(ep) + " x etp " + n(etp); break;
    case Rejection::bf16_layers_exceed_stage:
      d = n(t.bf16_layers_at_start()) + " at the start, " + n(t.bf16_layers_at_end()) + " at the end; " +
          n(m.num_layers) + " layers / pp " + n(pp) + " = " + n(pp > 0 ? m.num_layers / pp : 0);
      break;
  }
  return d.empty() ? describe(why) : describe(why) + std::string(" (") + d + ")";
}

}  // namespace lmsim
