#!/usr/bin/python3
"""Turns lmsim's HDF5 results into PNGs (Debian's python3-h5py and python3-matplotlib).
  predicted_vs_measured.png  predicted vs measured time and memory, y = x, per platform
  npu_vs_gpu_rank.png        NPU rank vs GPU rank with the top-k shortlist and the GPU optimum (paper's Figure 3)
  pareto_<search>.png        each search's Pareto front (time vs peak memory)
Usage: plots.py RESULTS_DIR"""
import glob, json, os, sys

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

res = sys.argv[1]


def strings(ds):
    return [x.decode() if isinstance(x, bytes) else x for x in ds[()]]


ev = os.path.join(res, "evaluation.h5")
if os.path.exists(ev):
    with h5py.File(ev, "r") as f:
        fig, axes = plt.subplots(1, 2, figsize=(11, 5))
        for ms in f:
            for plat in f[ms]:
                g = f[ms][plat]["lmsim"]
                for ax, what, scale, unit in ((axes[0], "iteration_time_s", 1, "s"),
                                              (axes[1], "max_peak_memory_bytes", 2**-30, "GiB")):
                    m = g["measured"][what][()] * scale
                    p = g["predicted"][what][()] * scale
                    ax.scatter(m, p, label=f"{ms} {plat}", s=22)
        for ax, title, unit in ((axes[0], "iteration time", "s"), (axes[1], "peak memory (max over ranks)", "GiB")):
            lo, hi = ax.get_xlim()
            lo, hi = min(lo, ax.get_ylim()[0]), max(hi, ax.get_ylim()[1])
            ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
            ax.set_xlabel(f"measured ({unit})")
            ax.set_ylabel(f"predicted ({unit})")
            ax.set_title(title)
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(res, "predicted_vs_measured.png"), dpi=110)
        plt.close(fig)

sl = os.path.join(res, "shortlist.h5")
if os.path.exists(sl):
    with h5py.File(sl, "r") as f:
        settings = list(f)
        fig, axes = plt.subplots(1, len(settings), figsize=(5.5 * len(settings), 5), squeeze=False)
        for ax, ms in zip(axes[0], settings):
            g = f[ms]["shortlist"]
            names = strings(g["optimization_config"])
            npu = g["npu_time_s"][()]
            gpu = g["gpu_time_s"][()]
            rn = np.argsort(np.argsort(npu)) + 1
            rg = np.argsort(np.argsort(gpu)) + 1
            rep = json.loads(g.attrs["report_json"])
            k = rep["k"]
            ax.scatter(rn, rg, c="grey", s=28)
            short = rn <= k
            ax.scatter(rn[short], rg[short], c="tab:blue", s=46, label=f"NPU top-{k} shortlist")
            best = int(np.argmin(gpu))
            ax.scatter([rn[best]], [rg[best]], marker="*", c="tab:red", s=220, label="GPU optimum")
            for i, n in enumerate(names):
                ax.annotate(n.replace("-cp1", ""), (rn[i], rg[i]), fontsize=6, xytext=(3, 2), textcoords="offset points")
            ax.axvline(k + 0.5, color="tab:blue", ls=":", lw=1)
            ax.set_xlabel("NPU rank (measured time)")
            ax.set_ylabel("GPU rank (measured time)")
            ax.set_title(f"{ms}: rho = {rep['cross_platform']['strata'][0]['time_spearman']:.3f}")
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(res, "npu_vs_gpu_rank.png"), dpi=110)
        plt.close(fig)

for path in sorted(glob.glob(os.path.join(res, "search_*.h5"))):
    with h5py.File(path, "r") as f:
        p = f["pareto"]
        t = p["iteration_time_s"][()]
        m = p["max_peak_memory_bytes"][()] / 2**30
        names = strings(p["config_name"])
        fig, ax = plt.subplots(figsize=(6.5, 4.5))
        ax.step(t, m, where="post", color="tab:green")
        ax.scatter(t, m, color="tab:green", s=20)
        for x, y, n in list(zip(t, m, names))[:12]:
            ax.annotate(n, (x, y), fontsize=6, xytext=(3, 2), textcoords="offset points")
        r = f["ranking"]
        ax.scatter(r["iteration_time_s"][()], r["max_peak_memory_bytes"][()] / 2**30, marker="x", c="tab:orange",
                   s=24, label="top-k by time")
        ax.set_xlabel("predicted iteration time (s)")
        ax.set_ylabel("predicted peak memory (GiB)")
        ax.set_title("Pareto front: " + os.path.basename(path)[:-3])
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(path[:-3].replace("search_", "pareto_") + ".png", dpi=110)
        plt.close(fig)
print("plots written to", res)
