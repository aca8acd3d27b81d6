#!/usr/bin/python3
"""Prints the main job's summary from its JSON outputs: accuracy per platform, the recommended configuration per
model and platform, and the NPU -> GPU shortlist with its regret. Usage: summary.py RESULTS_DIR"""
import json, os, sys

res = sys.argv[1]
print("\n================ lmsim summary ================")
kinds = {json.load(open(os.path.join(res, f"params_{plat}.json")))["report"].get("cv", {}).get("kind", "")
         for plat in ("gpu", "npu")}
short = {"leave-one-model-out": "LOMO", "loo": "LOO"}
cv = short.get(kinds.pop(), "CV") if len(kinds) == 1 else "CV"
print("Accuracy (θ fitted per platform on both Qwen3 models; held out: %s = %s):" % (
    cv, {"LOMO": "leave-one-model-out", "LOO": "leave-one-configuration-out"}.get(cv, "cross-validation")))
print("  %-4s %-22s %-22s %-12s %-12s %s" % ("", "time MAPE in / %s %%" % cv, "memory MAPE in / %s %%" % cv,
                                             "min time rho", "min mem rho", "top-1 strata"))
for plat in ("gpu", "npu"):
    p = json.load(open(os.path.join(res, f"params_{plat}.json")))
    i, c = p["report"]["in_sample"], p["report"].get("cv", {})
    print("  %-4s %9.2f / %-10.2f %9.2f / %-10.2f %-12.3f %-12.3f %d/%d" % (
        plat, i["time_mape_pct"], c.get("time_mape_pct", float("nan")), i["memory_mape_pct"],
        c.get("memory_mape_pct", float("nan")), i["time_spearman"], i["memory_spearman"], i["top1_strata_hits"],
        i["strata"]))
print("  (paper, calibrated Calculon in-sample: time MAPE 7.97-11.22 %, memory MAPE 12.55-15.99 %)")
pub = os.path.join(res, "evaluation_published.json")
if os.path.exists(pub):
    print("\nGPU systems on the published runs (data/public; θ fitted in step 1):")
    for r in json.load(open(pub)):
        what = "runs θ was fitted on" if r["predictor"].endswith("_in_sample") else "never fitted (validation)"
        print("  %-14s %-27s %-26s n=%2d  time MAPE %6.2f %%" % (
            r["platform"], r["model_setting"], what, r["n_time"], r["time_mape_pct"]))
print("\nRecommended configuration (MPI search, predicted fastest that fits):")
for f in sorted(os.listdir(res)):
    if f.startswith("search_") and f.endswith(".json"):
        s = json.load(open(os.path.join(res, f)))
        best = s["ranking"][0]
        p90 = best.get("iteration_time_s_p90")
        print("  %-12s %-4s %-34s %6.2f s%s  %5.1f GiB%s   (%d candidates, %d fit, %.3f s, %d ranks)" % (
            s["model"], f.split("_")[-1][:-5], best["config_name"], best["iteration_time_s"],
            " (p90 %.2f)" % p90 if p90 else "", best["max_peak_memory_bytes"] / 2**30,
            " P(fits) %.2f" % best["p_fits"] if best.get("p_fits") is not None else "",
            s["space_size"], s["feasible"], s["wall_s"], s["ranks"]))
        if best.get("p_fits") is not None and best["p_fits"] < 0.9:  # as search warns: the #1 may not fit
            sure = next((i for i, r in enumerate(s["ranking"]) if (r.get("p_fits") or 0) >= 0.9), None)
            print("  %-12s      fits with P(fits) %.2f only; %s" % ("", best["p_fits"], (
                "the first listed that fits with P(fits) >= 0.9 is #%d, %s (%.2f s, %+.1f %%)" % (
                    sure + 1, s["ranking"][sure]["config_name"], s["ranking"][sure]["iteration_time_s"],
                    100 * (s["ranking"][sure]["iteration_time_s"] / best["iteration_time_s"] - 1))
                if sure is not None else "none of the %d listed fits with P(fits) >= 0.9" % len(s["ranking"]))))
        leans = s.get("best_leans_on_unfitted") or []
        if leans:  # the best layout's speed rests partly on parameters θ's runs never measured
            print("  %-12s      leans on parameters its θ never measured (held at their prior): %s" % (
                "", ", ".join("%s (time ± %.1f %%)" % (l["name"], 100 * l["time_log_sd"]) for l in leans)))
        if s.get("best_flash_attention_from_cp"):  # the stack turns flash attention on with CP only
            print("  %-12s      runs flash attention only because cp > 1 turns it on (as MindSpeed-LLM does); "
                  "--flash-attention on,off weighs it without CP too" % "")
print("\nNPU -> GPU shortlist (measured NPU times, scored on measured GPU times):")
sl = json.load(open(os.path.join(res, "shortlist.json")))
for ms, r in sl.items():
    rule = r["rules"][0]
    x = r["cross_platform"]["strata"][0]
    print("  %-14s %d -> %d candidates: %s; GPU optimum %s %s; top-1 regret %.1f %%, top-%d regret %.1f %%; "
          "time rho %.3f, tau_b %.3f" % (ms, r["candidates"], r["k"], ", ".join(rule["shortlist"]), r["target_optimum"],
                                         "inside" if rule["contains_target_optimum"] else "MISSED",
                                         rule["top1_regret_pct"], r["k"], rule["topk_regret_pct"], x["time_spearman"],
                                         x["time_kendall_tau_b"]))
pngs = sorted(f for f in os.listdir(res) if f.endswith(".png"))
h5 = sorted(f for f in os.listdir(res) if f.endswith(".h5"))
print("\nFiles in %s: %s" % (res, ", ".join(h5 + pngs)))
