#!/usr/bin/env python3
"""Regenerates models.json from the public model-card facts in model_architectures.csv (the LM-SimBench
models) plus the reference models below. Run: python3 generate_models.py ARCH_CSV > models.json"""
import csv, json, re, sys

def num(s):
    m = re.match(r"\s*(\d+)", s or "")
    return int(m.group(1)) if m else 0

# Published totals (model cards / release notes), in parameters; active = per token for MoE.
CARD = {
    "Qwen1.5-1.8B": 1.84e9, "Qwen1.5-4B": 3.95e9, "Qwen2-1.5B": 1.54e9, "Qwen2.5-0.5B": 0.49e9,
    "Qwen2.5-3B": 3.09e9, "Qwen2.5-7B": 7.61e9, "Qwen2.5-14B": 14.7e9, "Qwen2.5-32B": 32.5e9,
    "Qwen2.5-72B": 72.7e9, "Qwen3-0.6B": 0.6e9, "Qwen3-1.7B": 1.7e9, "Qwen3-8B": 8.2e9,
    "Qwen3-30B-A3B": 30.5e9, "Mistral-7B": 7.24e9, "Phi-3.5-mini-instruct": 3.82e9,
    "Phi-3.5-MoE-instruct": 41.9e9, "Gemma-2-9B": 9.24e9, "Gemma-2-27B": 27.2e9, "GLM-4-9B": 9.4e9,
    "InternLM2.5-1.8B": 1.89e9, "InternLM2.5-7B": 7.74e9, "InternLM2.5-20B": 19.86e9,
    "InternLM3-8B-instruct": 8.8e9,
}
ACTIVE = {"Qwen3-30B-A3B": 3.3e9, "Phi-3.5-MoE-instruct": 6.6e9}
RENAME = {"Mistral-7B (v0.1 / v0.3)": "Mistral-7B"}

def gpt_oss(name, layers, experts, total, card_active, active):
    """OpenAI gpt-oss (model card, Aug 2025, and config.json): alternating 128-token sliding-window and full
    attention layers (the first windowed), attention sinks (one learned logit per head: no matrix work), biased
    q/k/v/o projections, MoE in every layer. The card's active count leaves out the input embedding (a lookup);
    lmsim's keeps it, so only the total is checked against the card."""
    return {"name": name, "hidden_size": 2880, "num_layers": layers, "num_attention_heads": 64, "num_kv_heads": 8,
            "head_dim": 64, "ffn_hidden_size": 2880, "vocab_size": 201088, "tied_embeddings": False,
            "activation": "swiglu", "norm": "rmsnorm", "qkv_bias": True, "qk_norm": False, "post_norms": False,
            "sliding_window": 128, "window_attn_skip_freq": 2,
            "moe": {"num_experts": experts, "experts_per_token": 4, "moe_ffn_hidden_size": 2880},
            "card_total_params": total,
            "source": f"{name} model card / config.json (its {card_active} active parameters leave out the input "
                      f"embedding, a lookup; lmsim's active count keeps it: {active})"}


models = []
windows = {}
with open(sys.argv[1]) as f:
    for r in csv.DictReader(f):
        name = RENAME.get(r["model"], r["model"])
        act = r["activation"].lower()
        m = {
            "name": name,
            "hidden_size": num(r["hidden_size"]),
            "num_layers": num(r["num_hidden_layers"]),
            "num_attention_heads": num(r["num_attention_heads"]),
            "num_kv_heads": num(r["num_key_value_heads"]),
            "head_dim": num(r["head_dim"]),
            "ffn_hidden_size": num(r["intermediate_size"]),
            "vocab_size": num(r["vocab_size"]),
            "tied_embeddings": r["tie_word_embeddings"].strip().lower().startswith("true"),
            "activation": "geglu" if "gelu" in act else "swiglu",
            "norm": "layernorm" if r["norm"].lower().startswith("layernorm") else "rmsnorm",
            "qkv_bias": r["qkv_bias"].strip().lower().startswith("true"),
            "qk_norm": "qk-norm" in r["special_features"].lower(),
            "post_norms": "pre+post" in r["norm"].lower(),
        }
        # Sliding-window attention as the card states it ("sliding_window 4096", "sliding 4096 on alternating
        # layers"; Mistral's row names v0.1's window, the version whose vocabulary num() reads).
        # A row "same as 9B" takes the window of the row before it of the same architecture.
        win = re.search(r"sliding(?:_window)? (\d+)", r["special_features"])
        if win:
            m["sliding_window"] = int(win.group(1))
            m["window_attn_skip_freq"] = 2 if "alternating" in r["special_features"] else 0
            windows[r["hf_architecture"]] = (m["sliding_window"], m["window_attn_skip_freq"])
        elif r["special_features"].startswith("same as") and r["hf_architecture"] in windows:
            m["sliding_window"], m["window_attn_skip_freq"] = windows[r["hf_architecture"]]
        # Gemma-2's final-logit soft-capping ("final softcap 30"), inherited by a row "same as 9B".
        cap = re.search(r"final softcap (\d+)", r["special_features"])
        if cap:
            m["final_logit_softcapping"] = float(cap.group(1))
            windows[r["hf_architecture"] + "/softcap"] = m["final_logit_softcapping"]
        elif r["special_features"].startswith("same as") and r["hf_architecture"] + "/softcap" in windows:
            m["final_logit_softcapping"] = windows[r["hf_architecture"] + "/softcap"]
        if num(r["num_experts"]):
            m["moe"] = {"num_experts": num(r["num_experts"]), "experts_per_token": num(r["num_experts_per_tok"]),
                        "moe_ffn_hidden_size": num(r["moe_intermediate_size"])}
        m["card_total_params"] = CARD[name]
        if name in ACTIVE:
            m["card_active_params"] = ACTIVE[name]
        m["source"] = "model_architectures.csv: " + r["verified_source"][:160]
        models.append(m)

models += [
    {"name": "Llama-3-8B", "hidden_size": 4096, "num_layers": 32, "num_attention_heads": 32, "num_kv_heads": 8,
     "head_dim": 128, "ffn_hidden_size": 14336, "vocab_size": 128256, "tied_embeddings": False,
     "activation": "swiglu", "norm": "rmsnorm", "qkv_bias": False, "qk_norm": False, "post_norms": False,
     "card_total_params": 8.03e9, "source": "Meta Llama 3 model card / config.json"},
    {"name": "Llama-3-70B", "hidden_size": 8192, "num_layers": 80, "num_attention_heads": 64, "num_kv_heads": 8,
     "head_dim": 128, "ffn_hidden_size": 28672, "vocab_size": 128256, "tied_embeddings": False,
     "activation": "swiglu", "norm": "rmsnorm", "qkv_bias": False, "qk_norm": False, "post_norms": False,
     "card_total_params": 70.6e9, "source": "Meta Llama 3 model card / config.json"},
    {"name": "Llama-3.1-405B", "hidden_size": 16384, "num_layers": 126, "num_attention_heads": 128,
     "num_kv_heads": 8, "head_dim": 128, "ffn_hidden_size": 53248, "vocab_size": 128256, "tied_embeddings": False,
     "activation": "swiglu", "norm": "rmsnorm", "qkv_bias": False, "qk_norm": False, "post_norms": False,
     "card_total_params": 405.9e9, "source": "Meta Llama 3.1 model card / config.json"},
    {"name": "GPT-3-175B", "hidden_size": 12288, "num_layers": 96, "num_attention_heads": 96, "num_kv_heads": 96,
     "head_dim": 128, "ffn_hidden_size": 49152, "vocab_size": 50257, "tied_embeddings": True,
     "activation": "gelu", "norm": "layernorm", "qkv_bias": True, "qk_norm": False, "post_norms": False,
     "position_embedding_type": "learned_absolute", "max_position_embeddings": 2048,
     "card_total_params": 175e9, "source": "Brown et al. 2020, Table 2.1"},
    {"name": "DeepSeek-V3", "hidden_size": 7168, "num_layers": 61, "num_attention_heads": 128, "num_kv_heads": 128,
     "head_dim": 128, "ffn_hidden_size": 18432, "vocab_size": 129280, "tied_embeddings": False,
     "activation": "swiglu", "norm": "rmsnorm", "qkv_bias": False, "qk_norm": False, "post_norms": False,
     "moe": {"num_experts": 256, "experts_per_token": 8, "moe_ffn_hidden_size": 2048, "num_shared_experts": 1,
             "first_dense_layers": 3, "moe_layer_frequency": 1, "moe_router_num_groups": 8,
             "moe_router_group_topk": 4},
     "mla": {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "v_head_dim": 128},
     "mtp_layers": 1,
     "card_total_params": 671e9, "card_active_params": 37e9,
     "source": "DeepSeek-V3 technical report / config.json (card counts exclude the 1-layer MTP module, num_nextn_predict_layers 1)"},
    {"name": "Llama-2-7B", "hidden_size": 4096, "num_layers": 32, "num_attention_heads": 32, "num_kv_heads": 32,
     "head_dim": 128, "ffn_hidden_size": 11008, "vocab_size": 32000, "tied_embeddings": False,
     "activation": "swiglu", "norm": "rmsnorm", "qkv_bias": False, "qk_norm": False, "post_norms": False,
     "card_total_params": 6.74e9, "source": "Meta Llama 2 model card / config.json"},
    {"name": "Llama-2-13B", "hidden_size": 5120, "num_layers": 40, "num_attention_heads": 40, "num_kv_heads": 40,
     "head_dim": 128, "ffn_hidden_size": 13824, "vocab_size": 32000, "tied_embeddings": False,
     "activation": "swiglu", "norm": "rmsnorm", "qkv_bias": False, "qk_norm": False, "post_norms": False,
     "card_total_params": 13.0e9, "source": "Meta Llama 2 model card / config.json"},
    {"name": "Llama-2-70B", "hidden_size": 8192, "num_layers": 80, "num_attention_heads": 64, "num_kv_heads": 8,
     "head_dim": 128, "ffn_hidden_size": 28672, "vocab_size": 32000, "tied_embeddings": False,
     "activation": "swiglu", "norm": "rmsnorm", "qkv_bias": False, "qk_norm": False, "post_norms": False,
     "card_total_params": 69.0e9, "source": "Meta Llama 2 model card / config.json"},
    {"name": "Qwen3-235B-A22B", "hidden_size": 4096, "num_layers": 94, "num_attention_heads": 64, "num_kv_heads": 4,
     "head_dim": 128, "ffn_hidden_size": 12288, "vocab_size": 151936, "tied_embeddings": False,
     "activation": "swiglu", "norm": "rmsnorm", "qkv_bias": False, "qk_norm": True, "post_norms": False,
     "moe": {"num_experts": 128, "experts_per_token": 8, "moe_ffn_hidden_size": 1536},
     "card_total_params": 235e9, "card_active_params": 22e9, "source": "Qwen3-235B-A22B model card / config.json"},
    gpt_oss("gpt-oss-120b", 36, 128, 116.83e9, "5.13B", "5.71B"),
    gpt_oss("gpt-oss-20b", 24, 32, 20.91e9, "3.61B", "4.19B"),
    {"name": "Nemotron-4-340B", "hidden_size": 18432, "num_layers": 96, "num_attention_heads": 96, "num_kv_heads": 8,
     "head_dim": 192, "ffn_hidden_size": 73728, "vocab_size": 256000, "tied_embeddings": False,
     "activation": "gelu", "norm": "layernorm", "qkv_bias": False, "qk_norm": False, "post_norms": False,
     "card_total_params": 341e9,
     "source": "Nemotron-4 340B technical report (2024), Table 1: squared-ReLU MLP (non-gated, modelled as the gelu class), GQA 8, untied"},
    # Korthikanti et al. 2022 (Reducing Activation Recomputation in Large Transformer Models), Table 3: the GPT
    # models of its experiments besides GPT-3 175B and MT-NLG 530B (GPT-2 BPE vocabulary, learned positions).
    {"name": "GPT-22B", "hidden_size": 6144, "num_layers": 48, "num_attention_heads": 64, "num_kv_heads": 64,
     "head_dim": 96, "ffn_hidden_size": 24576, "vocab_size": 50257, "tied_embeddings": True,
     "activation": "gelu", "norm": "layernorm", "qkv_bias": True, "qk_norm": False, "post_norms": False,
     "position_embedding_type": "learned_absolute", "max_position_embeddings": 2048,
     "card_total_params": 22e9, "source": "Korthikanti et al. 2022, Table 3 (22B: 64 heads, hidden 6144, 48 layers)"},
    {"name": "GPT-1T", "hidden_size": 25600, "num_layers": 128, "num_attention_heads": 160, "num_kv_heads": 160,
     "head_dim": 160, "ffn_hidden_size": 102400, "vocab_size": 50257, "tied_embeddings": True,
     "activation": "gelu", "norm": "layernorm", "qkv_bias": True, "qk_norm": False, "post_norms": False,
     "position_embedding_type": "learned_absolute", "max_position_embeddings": 2048,
     "card_total_params": 1e12,
     "source": "Korthikanti et al. 2022, Table 3 (1T: 160 heads, hidden 25600, 128 layers)"},
    {"name": "Turing-NLG-530B", "hidden_size": 20480, "num_layers": 105, "num_attention_heads": 128,
     "num_kv_heads": 128, "head_dim": 160, "ffn_hidden_size": 81920, "vocab_size": 51200, "tied_embeddings": True,
     "activation": "gelu", "norm": "layernorm", "qkv_bias": True, "qk_norm": False, "post_norms": False,
     "position_embedding_type": "learned_absolute", "max_position_embeddings": 2048,
     "card_total_params": 530e9,
     "source": "Smith et al. 2022 (Megatron-Turing NLG 530B), Table 1; Calculon's example model"},
]

def dense(name, hidden, layers, heads, kv, head_dim, ffn, vocab, tied, card, source, qk_norm=False):
    """A dense decoder with SwiGLU, RMSNorm and no biases (Llama 3.x, Qwen3) from its config.json."""
    return {"name": name, "hidden_size": hidden, "num_layers": layers, "num_attention_heads": heads,
            "num_kv_heads": kv, "head_dim": head_dim, "ffn_hidden_size": ffn, "vocab_size": vocab,
            "tied_embeddings": tied, "activation": "swiglu", "norm": "rmsnorm", "qkv_bias": False,
            "qk_norm": qk_norm, "post_norms": False, "card_total_params": card, "source": source}


def mixtral(name, hidden, layers, heads, ffn, card, card_active):
    """Mistral AI's Mixtral (config.json): 8 SwiGLU experts of intermediate_size each, 2 per token, in every
    layer; GQA 8; full attention (the released configs set sliding_window null); untied 32000-token vocabulary
    (v0.1)."""
    return {"name": name, "hidden_size": hidden, "num_layers": layers, "num_attention_heads": heads, "num_kv_heads": 8,
            "head_dim": 128, "ffn_hidden_size": ffn, "vocab_size": 32000, "tied_embeddings": False,
            "activation": "swiglu", "norm": "rmsnorm", "qkv_bias": False, "qk_norm": False, "post_norms": False,
            "moe": {"num_experts": 8, "experts_per_token": 2, "moe_ffn_hidden_size": ffn},
            "card_total_params": card, "card_active_params": card_active,
            "source": f"{name}-v0.1 model card / config.json"}


# Further models users plan for, from their config.json (Llama 3.1 / 3.2 share Llama 3's layers; their RoPE
# scaling does not change the work).
models += [
    dense("Llama-3.1-8B", 4096, 32, 32, 8, 128, 14336, 128256, False, 8.03e9, "Meta Llama 3.1 model card / config.json"),
    dense("Llama-3.1-70B", 8192, 80, 64, 8, 128, 28672, 128256, False, 70.6e9,
          "Meta Llama 3.1 model card / config.json"),
    dense("Llama-3.2-1B", 2048, 16, 32, 8, 64, 8192, 128256, True, 1.24e9, "Meta Llama 3.2 model card / config.json"),
    dense("Llama-3.2-3B", 3072, 28, 24, 8, 128, 8192, 128256, True, 3.21e9, "Meta Llama 3.2 model card / config.json"),
    dense("Qwen3-4B", 2560, 36, 32, 8, 128, 9728, 151936, True, 4.0e9, "Qwen3-4B model card / config.json", True),
    dense("Qwen3-14B", 5120, 40, 40, 8, 128, 17408, 151936, False, 14.8e9, "Qwen3-14B model card / config.json", True),
    dense("Qwen3-32B", 5120, 64, 64, 8, 128, 25600, 151936, False, 32.8e9, "Qwen3-32B model card / config.json", True),
    mixtral("Mixtral-8x7B", 4096, 32, 32, 14336, 46.7e9, 12.9e9),
    mixtral("Mixtral-8x22B", 6144, 56, 48, 16384, 141e9, 39e9),
]
json.dump({"models": models}, sys.stdout, indent=1)
print()
