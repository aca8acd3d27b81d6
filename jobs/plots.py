#!/usr/bin/python3
"""Plots that answer questions, from any folder of lmsim HDF5 results (Debian's python3-h5py, python3-matplotlib).

Each *.h5 file is recognised by its layout and gives one PNG beside it:
  <report>_heldout.png   calibrate --report with --cv: held-out (cross-validated) predicted vs measured time and
                         memory, y = x with +-10 % bands, MAPE in the titles (in-sample only when no CV was run,
                         and then titled so)
  <evaluation>.png       evaluate --out: predicted vs measured per platform, +-10 % bands, MAPE in the titles
  <search>_pareto.png    search --out: the (time, peak memory) Pareto front, the top-k, the device capacity and
                         margin lines, labels on the fastest points only
  <shortlist>.png        shortlist --out: source-platform rank vs target-platform rank with the shortlist (a
                         source-only setting: measured source time vs predicted target time, shortlists marked)
Usage: plots.py RESULTS_DIR [OUT_DIR]   (lmsim plot RESULTS_DIR runs this)"""
import glob
import json
import os
import sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

GIB = 2.0**30


def strings(ds):
    return [x.decode() if isinstance(x, bytes) else x for x in ds[()]]


def first(g, *names):
    for n in names:
        if n in g:
            return g[n][()]
    raise KeyError(names[0])


def mape(p, m):
    ok = np.isfinite(p) & np.isfinite(m) & (m > 0)
    return float(np.mean(np.abs(p[ok] / m[ok] - 1)) * 100) if ok.any() else float("nan")


def parity(ax, pairs, unit, title):
    """Predicted vs measured with y = x and +-10 % bands; pairs: [(label, predicted, measured)]."""
    allv = np.concatenate([np.concatenate([p, m]) for _, p, m in pairs if len(p)] or [np.array([1.0])])
    allv = allv[np.isfinite(allv) & (allv > 0)]
    lo, hi = (allv.min() * 0.85, allv.max() * 1.15) if len(allv) else (0.1, 1)
    x = np.linspace(lo, hi, 50)
    ax.fill_between(x, 0.9 * x, 1.1 * x, color="0.9", label="±10 %")
    ax.plot(x, x, "k--", lw=1, label="y = x")
    ps, ms = [], []
    for label, p, m in pairs:
        ax.scatter(m, p, s=22, label=label)
        ps.append(p)
        ms.append(m)
    err = mape(np.concatenate(ps), np.concatenate(ms)) if ps else float("nan")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(f"measured ({unit})")
    ax.set_ylabel(f"predicted ({unit})")
    ax.set_title(f"{title}: MAPE {err:.2f} %")
    ax.legend(fontsize=7)


def calibration_report(f, out):
    split = "cv" if "cv" in f else "test" if "test" in f else "in_sample"
    g = f[split]
    what = {"cv": "held-out (cross-validation)", "test": "held-out test set", "in_sample": "IN-SAMPLE (no CV run)"}
    settings = strings(g["model_setting"])
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    for ax, pred, meas, scale, unit, title in (
            (axes[0], ("predicted_time_s",), ("measured_time_s",), 1, "s", "iteration time"),
            (axes[1], ("predicted_max_peak_memory_bytes", "predicted_peak_memory_bytes"),
             ("measured_max_peak_memory_bytes", "measured_peak_memory_bytes"), 1 / GIB, "GiB", "peak memory")):
        p, m = first(g, *pred) * scale, first(g, *meas) * scale
        pairs = [(s, p[[i for i, x in enumerate(settings) if x == s]], m[[i for i, x in enumerate(settings) if x == s]])
                 for s in sorted(set(settings))]
        parity(ax, pairs, unit, f"{title}, {what[split]}")
    fig.tight_layout()
    fig.savefig(out + "_heldout.png", dpi=110)
    plt.close(fig)
    return out + "_heldout.png"


def evaluation(f, out):
    time_pairs, mem_pairs, in_sample = [], [], False
    for ms in f:
        if not isinstance(f[ms], h5py.Group):
            continue
        for plat in f[ms]:
            for pred in f[ms][plat]:
                g = f[ms][plat][pred]
                if "measured" not in g:
                    continue
                in_sample = in_sample or pred.endswith("_in_sample")
                lab = f"{ms} {plat} ({pred})"
                time_pairs.append((lab, g["predicted/iteration_time_s"][()], g["measured/iteration_time_s"][()]))
                mem_pairs.append((lab, g["predicted/max_peak_memory_bytes"][()] / GIB,
                                  g["measured/max_peak_memory_bytes"][()] / GIB))
    # Published measurements carry times only: no memory panel then.
    mem_pairs = [x for x in mem_pairs if np.isfinite(x[2]).any()]
    fig, axes = plt.subplots(1, 2 if mem_pairs else 1, figsize=(11 if mem_pairs else 6.5, 5), squeeze=False)
    # evaluate scores the θ it is given: in-sample when that θ was fitted on these runs (the held-out view is the
    # calibration report's plot); on published runs the ones θ was fitted on are their own series (lmsim_in_sample).
    parity(axes[0][0], time_pairs, "s", "iteration time, θ as given")
    if mem_pairs:
        parity(axes[0][1], mem_pairs, "GiB", "peak memory, θ as given")
    fig.suptitle("evaluate: runs θ was fitted on (lmsim_in_sample) apart from runs it never saw (lmsim)" if in_sample
                 else "evaluate: in-sample for a θ fitted on these runs; see *_heldout.png for cross-validated errors",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out + ".png", dpi=110)
    plt.close(fig)
    return out + ".png"


def search(f, out):
    p, r = f["pareto"], f["ranking"]
    t, m = p["iteration_time_s"][()], p["max_peak_memory_bytes"][()] / GIB
    names = strings(p["config_name"])
    prov = json.loads(f["provenance"].attrs["json"])
    # Several scenarios (devices, sequence, batch, swept settings): each label also names what sets its scenario
    # apart, the parts of the scenario label that differ between them.
    labels = [s["label"].split("/") for s in prov.get("scenarios", [])]
    if len(labels) > 1 and "scenario" in p:
        differ = [i for i in range(max(map(len, labels)))
                  if len({tuple(l[i:i + 1]) for l in labels}) > 1]
        names = [n + " (" + "/".join(l.split("/")[i] for i in differ if i < len(l.split("/"))) + ")"
                 for n, l in zip(names, strings(p["scenario"]))]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    ax.step(t, m, where="post", color="tab:green", lw=1)
    ax.scatter(t, m, color="tab:green", s=20, label="Pareto front (time, memory)")
    ax.scatter(r["iteration_time_s"][()], r["max_peak_memory_bytes"][()] / GIB, marker="x", c="tab:orange", s=26,
               label="top-k by the objective")
    # Labels on the fast corner only, in a column inside the axes, highest memory first, so none overlap.
    corner = sorted(list(zip(t, m, names))[:6], key=lambda p: -p[1])
    for k, (x, y, n) in enumerate(corner):
        ax.annotate(n, (x, y), fontsize=7, xytext=(0.22, 0.86 - 0.075 * k), textcoords="axes fraction",
                    va="center", arrowprops=dict(arrowstyle="-", lw=0.5, color="0.5"))
    caps = {s["system"]: s.get("hbm_capacity_bytes") for s in prov.get("scenarios", [])}
    margin = prov.get("memory_margin_gib", 0)
    for sysname, cap in caps.items():
        if cap:
            ax.axhline(cap / GIB, color="tab:red", lw=1, label=f"{sysname} capacity")
            if margin:
                ax.axhline(cap / GIB - margin, color="tab:red", lw=1, ls=":", label=f"capacity - {margin:g} GiB margin")
    ax.set_xlabel("predicted iteration time (s)")
    ax.set_ylabel("predicted peak memory per device (GiB)")
    ax.set_title(f"{prov.get('model', '')}: {len(t)} Pareto-optimal layouts")
    ax.legend(fontsize=7, loc="center right")
    fig.tight_layout()
    fig.savefig(out + "_pareto.png", dpi=110)
    plt.close(fig)
    return out + "_pareto.png"


def proposal(ax, ms, g):
    """A source-only setting: measured source time against the target's predicted time, the shortlists marked."""
    rep = json.loads(g.attrs["report_json"])
    src, dst = rep.get("source", "npu"), rep.get("target", "gpu")
    names = strings(g["optimization_config"])
    a, b = g[f"{src}_time_s"][()], g[f"{dst}_predicted_time_s"][()]
    fits = g[f"{dst}_predicted_fits"][()] > 0
    ax.scatter(a[~fits], b[~fits], c="lightgrey", s=24, label=f"predicted not to fit {rep.get('target_system', dst)}")
    ax.scatter(a[fits], b[fits], c="grey", s=28, label="predicted to fit")
    marks = [("tab:blue", "o", 60), ("tab:orange", "s", 70), ("tab:green", "^", 80)]
    for (color, marker, size), rule in zip(marks, rep["rules"]):
        idx = [names.index(n) for n in rule["shortlist"] if n in names]
        ax.scatter(a[idx], b[idx], facecolors="none", edgecolors=color, marker=marker, s=size, label=rule["rule"])
    ax.set_xlabel(f"{src} measured time (s)")
    ax.set_ylabel(f"{dst} predicted time (s)")
    ax.set_title(f"{ms} (no {dst} measurement: unscored)")
    ax.legend(fontsize=6)


def shortlist(f, out):
    settings = [s for s in f if "shortlist" in f[s] or "proposal" in f[s]]
    fig, axes = plt.subplots(1, len(settings), figsize=(5.5 * len(settings), 5), squeeze=False)
    for ax, ms in zip(axes[0], settings):
        if "proposal" in f[ms]:
            proposal(ax, ms, f[ms]["proposal"])
            continue
        g = f[ms]["shortlist"]
        rep = json.loads(g.attrs["report_json"])
        src, dst = rep.get("source", "npu"), rep.get("target", "gpu")
        names = strings(g["optimization_config"])
        a, b = g[f"{src}_time_s"][()], g[f"{dst}_time_s"][()]
        ra, rb = np.argsort(np.argsort(a)) + 1, np.argsort(np.argsort(b)) + 1
        k = rep["k"]
        ax.scatter(ra, rb, c="grey", s=28)
        ax.scatter(ra[ra <= k], rb[ra <= k], c="tab:blue", s=46, label=f"{src} top-{k} shortlist")
        best = int(np.argmin(b))
        ax.scatter([ra[best]], [rb[best]], marker="*", c="tab:red", s=220, label=f"{dst} optimum")
        for i in np.argsort(ra)[:k + 2]:
            ax.annotate(names[i].replace("-cp1", ""), (ra[i], rb[i]), fontsize=6, xytext=(3, 2),
                        textcoords="offset points")
        ax.axvline(k + 0.5, color="tab:blue", ls=":", lw=1)
        ax.set_xlabel(f"{src} rank (measured time)")
        ax.set_ylabel(f"{dst} rank (measured time)")
        ax.set_title(ms)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out + ".png", dpi=110)
    plt.close(fig)
    return out + ".png"


def main():
    if len(sys.argv) < 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: plots.py RESULTS_DIR [OUT_DIR]")
    res = sys.argv[1]
    out_dir = sys.argv[2] if len(sys.argv) > 2 else res
    os.makedirs(out_dir, exist_ok=True)
    written = []
    for path in sorted(glob.glob(os.path.join(res, "*.h5"))):
        base = os.path.join(out_dir, os.path.basename(path)[:-3])
        try:
            with h5py.File(path, "r") as f:
                if "params" in f and ("in_sample" in f or "cv" in f):
                    written.append(calibration_report(f, base))
                elif "pareto" in f and "ranking" in f:
                    written.append(search(f, base))
                elif any(isinstance(f[k], h5py.Group) and ("shortlist" in f[k] or "proposal" in f[k]) for k in f):
                    written.append(shortlist(f, base))
                elif "summary_json" in f.attrs:
                    written.append(evaluation(f, base))
        except (OSError, KeyError) as e:
            print(f"skipped {path}: {e}", file=sys.stderr)
    for w in written:
        print("wrote", w)
    if not written:
        sys.exit(f"no lmsim results (calibrate --report, evaluate, search, shortlist *.h5) in {res}")


main()
