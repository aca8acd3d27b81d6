"""The Python module: same figures as the CLI, numpy per-rank memory, ValueError on bad input, installable."""
import glob
import json
import os
import subprocess

import numpy as np
import pytest

import lmsim

CLI = os.environ["LMSIM_BIN"]
KW = dict(model="Qwen3-1.7B", system="v100_sxm2_32g", devices=8, strategy="dp2-tp4-pp1-cp1-RC")


def cli(*args):
    return json.loads(subprocess.check_output([CLI, "--log-level", "error", "predict", *args, "--json"]))


def test_predict_equals_the_cli():
    d = lmsim.predict(**KW)
    c = cli("--model", "Qwen3-1.7B", "--system", "v100_sxm2_32g", "--devices", "8", "--strategy", "dp2-tp4-pp1-cp1-RC")
    assert d["iteration_time_s"] == c["iteration_time_s"]
    assert d["max_peak_memory_bytes"] == c["max_peak_memory_bytes"]
    assert d["breakdown"] == c["breakdown"]
    assert isinstance(d["peak_memory_bytes"], np.ndarray) and d["peak_memory_bytes"].shape == (8,)
    assert np.array_equal(d["peak_memory_bytes"], np.array(c["peak_memory_bytes"]))
    for key in ("mfu", "model_tflops_per_device", "tokens_per_s_per_device", "iteration_time_s_p90"):
        assert key in d
    assert "training_run" not in d
    run = lmsim.predict(**KW, train_tokens=1e9)["training_run"]
    assert run == cli("--model", "Qwen3-1.7B", "--system", "v100_sxm2_32g", "--devices", "8", "--strategy",
                      "dp2-tp4-pp1-cp1-RC", "--train-tokens", "1e9")["training_run"]
    assert run["tokens"] == 1e9 and run["time_s"] == run["iterations"] * d["iteration_time_s"]


def test_a_strategy_list_compares_them_as_the_cli_does():
    names = ["dp2-tp4-pp1-cp1-RC", "dp8-tp1-pp1-cp1-noRC"]
    d = lmsim.predict(**{**KW, "strategy": names})
    c = cli("--model", "Qwen3-1.7B", "--system", "v100_sxm2_32g", "--devices", "8", "--strategy", ",".join(names))
    assert [p["strategy"] for p in d["predictions"]] == names
    for p, q, name in zip(d["predictions"], c["predictions"], names):
        assert p["iteration_time_s"] == q["iteration_time_s"] == lmsim.predict(**{**KW, "strategy": name})[
            "iteration_time_s"]
        assert isinstance(p["peak_memory_bytes"], np.ndarray)
        assert np.array_equal(p["peak_memory_bytes"], np.array(q["peak_memory_bytes"]))
    assert d["predictions"][0]["iteration_time_s"] != d["predictions"][1]["iteration_time_s"]


def test_a_strategy_typed_in_any_order_takes_dp_from_devices():
    typed = lmsim.predict(**{**KW, "strategy": "RC-tp4"})  # 8 devices: dp 2, pp and cp 1
    named = lmsim.predict(**KW)
    assert typed["strategy"] == named["strategy"] == "dp2-tp4-pp1-cp1-RC"
    assert typed["iteration_time_s"] == named["iteration_time_s"]


def test_several_device_counts_compare_a_layout_at_each():
    d = lmsim.predict(**{**KW, "strategy": "tp4-RC", "devices": [4, 8]})
    assert [(p["strategy"], p["devices"]) for p in d["predictions"]] == [("dp1-tp4-pp1-cp1-RC", 4),
                                                                          ("dp2-tp4-pp1-cp1-RC", 8)]
    assert d["predictions"][1]["iteration_time_s"] == lmsim.predict(**KW)["iteration_time_s"]


def test_options_are_the_cli_options():
    d = lmsim.predict(model="Llama-3-8B", system="h100_sxm_80g", strategy="dp8-tp1-pp1-cp1-noRC", seq=8192,
                      global_batch=64, emit="megatron")
    assert d["settings"]["seq_length"] == 8192 and d["settings"]["global_batch_size"] == 64
    assert "--tensor-model-parallel-size 1" in d["emit"]["flags"]


def test_a_stack_sets_what_its_recipes_run():
    names = [st["name"] for st in lmsim.stacks()]
    assert {"gpu", "npu", "megatron-lm-2021", "nemo-24.07", "megatron-bridge"} <= set(names)
    d = lmsim.predict(model="Llama-3-8B", system="h100_sxm_80g", strategy="dp4-tp2-pp1-cp1-noRC", seq=8192,
                      global_batch=64, stack="megatron-bridge")
    assert d["settings"]["precision"] == "fp8" and d["settings"]["tp_comm_overlap"]
    assert d["settings"]["te_cross_entropy"] and d["settings"]["fp8_param_gather"]
    plain = lmsim.predict(model="Llama-3-8B", system="h100_sxm_80g", strategy="dp4-tp2-pp1-cp1-noRC", seq=8192,
                          global_batch=64)
    assert plain["settings"]["precision"] == "bf16" and d["iteration_time_s"] < plain["iteration_time_s"]
    with pytest.raises(ValueError, match="unknown stack 'nemo'"):
        lmsim.predict(model="Llama-3-8B", system="h100_sxm_80g", strategy="dp8-tp1-pp1-cp1-noRC", stack="nemo")


def test_bad_input_raises_value_error():
    with pytest.raises(ValueError, match="unknown model"):
        lmsim.predict(model="NoSuch", system="v100_sxm2_32g", strategy="dp8-tp1-pp1-cp1-RC")
    with pytest.raises(ValueError, match="lmsim.predict: unknown keyword 'modle'"):
        lmsim.predict(modle="Qwen3-1.7B", system="v100_sxm2_32g", strategy="dp8-tp1-pp1-cp1-RC")
    with pytest.raises(ValueError, match="lmsim.calibrate: unknown keyword 'plaform'"):
        lmsim.calibrate(plaform="gpu")
    with pytest.raises(ValueError, match="cannot run"):
        lmsim.predict(model="Qwen3-1.7B", system="v100_sxm2_32g", strategy="dp1-tp1-pp8-cp1-RC")


def run_cli(command, *args):
    return json.loads(subprocess.check_output([CLI, "--log-level", "error", command, *args, "--json"],
                                              env={**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1",
                                                   "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}))


def test_search_equals_the_cli():
    d = lmsim.search(model="Qwen3-0.6B", system="a100_sxm_80g", devices=[8, 16], global_batch=32, top=5,
                     recompute=["noRC", "RC"])
    c = run_cli("search", "--model", "Qwen3-0.6B", "--system", "a100_sxm_80g", "--devices", "8,16",
                "--global-batch", "32", "--top", "5", "--recompute", "noRC,RC", "--quiet")
    assert d["space_size"] == c["space_size"] and d["feasible"] == c["feasible"]
    assert [r["config_name"] for r in d["ranking"]] == [r["config_name"] for r in c["ranking"]]
    assert [r["iteration_time_s"] for r in d["ranking"]] == [r["iteration_time_s"] for r in c["ranking"]]
    with pytest.raises(ValueError, match="not a positive integer"):
        lmsim.search(model="Qwen3-0.6B", system="a100_sxm_80g", devices=8, micro_batch=0)


def test_search_train_tokens_gives_each_candidate_its_run(tmp_path):
    import h5py
    out = str(tmp_path / "s.h5")
    kw = dict(model="Qwen3-0.6B", system="a100_sxm_80g", devices=[8, 16], global_batch=32, top=5, train_tokens=1e9)
    d = lmsim.search(**kw, out=out)
    assert d["train_tokens"] == 1e9 and d["token_budget"] == 1e9
    iterations = -(-10**9 // (32 * 4096))
    with h5py.File(out, "r") as f:
        days, hours = f["/ranking/training_days"][:], f["/ranking/training_device_hours"][:]
        t = f["/ranking/iteration_time_s"][:]
        best_days = list(f["/best_per_scenario/training_days"][:])
    assert [b["training_days"] for b in d["best_per_scenario"]] == best_days and len(best_days) == 2
    for r, dd, hh, tt in zip(d["ranking"], days, hours, t):
        devices = int(r["scenario"].split("/")[1].removesuffix("dev"))
        assert abs(r["training_days"] - iterations * tt / 86400) < 1e-9 * r["training_days"] and r["training_days"] == dd
        assert abs(r["training_device_hours"] - iterations * tt * devices / 3600) < 1e-9 * hh and r["training_device_hours"] == hh
    without = {k: v for k, v in kw.items() if k != "train_tokens"}
    plain = lmsim.search(**without, out=str(tmp_path / "p.h5"))
    assert plain["train_tokens"] == 0 and plain["token_budget"] == 1e12 and "training_days" not in plain["ranking"][0]
    with h5py.File(str(tmp_path / "p.h5"), "r") as f:
        assert "training_days" not in f["/ranking"]


def test_calibrate_and_evaluate_return_their_json():
    c = lmsim.calibrate(platform="gpu", models=["qwen3_0.6b_4k"])
    assert c["params"]["matmul_efficiency"] > 0 and "uncertainty" in c and "provenance" in c
    e = lmsim.evaluate(models=["qwen3_0.6b_4k"])
    c = run_cli("evaluate", "--models", "qwen3_0.6b_4k")
    for key in ("time_mape_pct", "memory_mape_pct", "time_spearman", "n_time"):
        assert [x[key] for x in e] == [x[key] for x in c]
    s = lmsim.shortlist(k=2)
    assert s["qwen3_0.6b_4k"]["k"] == 2
    with pytest.raises(ValueError, match="--out is required|--platform"):
        lmsim.calibrate()


def test_cmake_install_puts_the_module_in_site_packages(tmp_path):
    build = os.environ["LMSIM_BUILD_DIR"]
    subprocess.check_call(["cmake", "--install", build], env={**os.environ, "DESTDIR": str(tmp_path)},
                          stdout=subprocess.DEVNULL)
    found = [p for p in tmp_path.rglob("lmsim*.so") if "site-packages" in str(p) or "dist-packages" in str(p)]
    assert found, "no module under a site-packages folder"
    out = subprocess.check_output(["/usr/bin/python3", "-c", "import lmsim; print(lmsim.__version__)"],
                                  env={**os.environ, "PYTHONPATH": str(found[0].parent)})
    assert out.strip()


def test_search_explains_itself():
    # Nothing fits: the closest candidate with its shortfall, and the smallest larger job that fits.
    d = lmsim.search(model="Llama-3-70B", system=["a100_sxm_80g", "h100_sxm_80g"], devices=8, seq=8192,
                     global_batch=64, top=3)
    assert d["feasible"] == 0 and d["ranking"] == []
    why = d["nothing_fits"]
    assert why["lacking_bytes"] > 0 and why["closest_max_peak_memory_bytes"] > 78 * 2**30
    assert [x["smallest_devices_that_fit"] for x in why["larger_jobs"]] == [32, 32]
    assert "commonest_rejection" not in why
    # No candidate can run at all (tp 3 against 32 heads): the rule they break, with one that breaks it, not memory.
    d = lmsim.search(model="Llama-3-8B", system="h100_sxm_80g", devices=24, tp=3, top=3)
    why = d["nothing_fits"]
    assert d["feasible"] == 0 and why["commonest_rejection"] == "heads_not_divisible_by_tp" and "closest_index" not in why
    cli = subprocess.run([CLI, "--log-level", "error", "search", "--model", "Llama-3-8B", "--system", "h100_sxm_80g",
                          "--devices", "24", "--tp", "3"], capture_output=True, text=True,
                         env={**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"})
    assert "no candidate can run; the rule broken most often is heads_not_divisible_by_tp" in cli.stdout, cli.stdout
    assert "(32 heads, tp 3)" in cli.stdout and "nothing fits in memory" not in cli.stdout, cli.stdout
    # Several scenarios: each one's best, consistent with the global ranking.
    d = lmsim.search(model="Qwen3-0.6B", system="a100_sxm_80g", devices=[8, 16], global_batch=[32, 64], top=50)
    best = {b["scenario"]: b for b in d["best_per_scenario"]}
    assert len(best) == 4
    for scen, b in best.items():
        ranked = [r for r in d["ranking"] if r["scenario"] == scen]
        if ranked:
            assert b["config_name"] == ranked[0]["config_name"] and b["iteration_time_s"] == ranked[0]["iteration_time_s"]
    # No even pipeline split: uneven stages are tried automatically, and said so.
    d = lmsim.search(model="Llama-3.1-405B", system="h100_sxm_80g", devices=2560, pp=5, seq=8192,
                     global_batch=2560, top=3)
    assert d["allow_uneven_layers"] is True and d["feasible"] > 0


def test_results_carry_units_booleans_and_checked_provenance(tmp_path):
    import hashlib
    import h5py
    out = tmp_path / "r.h5"
    subprocess.check_call([CLI, "--log-level", "error", "search", "--model", "Qwen3-0.6B", "--system", "a100_sxm_80g",
                           "--devices", "8", "--global-batch", "32", "--top", "5", "--quiet", "--out", str(out)],
                          env={**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"},
                          stdout=subprocess.DEVNULL)
    with h5py.File(out, "r") as f:
        r = f["/ranking"]
        assert r["iteration_time_s"].attrs["units"] == "s"
        assert r["max_peak_memory_bytes"].attrs["units"] == "bytes"
        assert r["breakdown/compute_s"].attrs["units"] == "s"
        assert r["tokens_per_s_per_device"].attrs["units"] == "tokens/s"
        assert r["sequence_parallel"].dtype == np.bool_ and r["distributed_optimizer"].dtype == np.bool_
        p = f["/provenance"].attrs
        assert "search" in p["command_line"] and str(out) in p["command_line"]
        assert p["lmsim_commit"] and p["lmsim_version"]
        theta = json.loads(p["theta_files_json"])
        assert theta, "the shipped θ file is recorded"
        for t in theta:
            assert hashlib.sha256(open(t["path"], "rb").read()).hexdigest() == t["sha256"]


def test_export_csv_matches_the_hdf5(tmp_path):
    import csv
    import h5py
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    out = tmp_path / "r.h5"
    subprocess.check_call([CLI, "--log-level", "error", "search", "--model", "Qwen3-0.6B", "--system", "a100_sxm_80g",
                           "--devices", "8,16", "--global-batch", "32", "--top", "5", "--quiet", "--write-all",
                           "--out", str(out)], env=env, stdout=subprocess.DEVNULL)
    listing = json.loads(subprocess.check_output([CLI, "export", str(out), "--csv", "--json"]))
    names = sorted(os.path.basename(f) for f in listing["files"])
    assert names == ["all.csv", "best_per_scenario.csv", "feasibility.csv", "pareto.csv", "ranking.csv"]
    rows = list(csv.DictReader(open(tmp_path / "r_csv" / "ranking.csv")))
    all_rows = list(csv.DictReader(open(tmp_path / "r_csv" / "all.csv")))
    with h5py.File(out, "r") as f:
        assert [r["config_name"] for r in rows] == [x.decode() for x in f["/ranking/config_name"][...]]
        assert [float(r["iteration_time_s"]) for r in rows] == list(f["/ranking/iteration_time_s"][...])
        assert len(all_rows) == int(f["/provenance"].attrs["space_size"])
    assert {r["sequence_parallel"] for r in rows} <= {"TRUE", "FALSE"}
    assert "breakdown/compute_s" in rows[0]
    feasible = [r for r in all_rows if r["status"] == "feasible"]
    assert feasible and all(float(r["iteration_time_s"]) > 0 for r in feasible)
    assert min(float(r["iteration_time_s"]) for r in feasible) == float(rows[0]["iteration_time_s"])


def test_plot_any_results_folder(tmp_path):
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    # Two scenarios: the Pareto labels name what sets each apart.
    subprocess.check_call([CLI, "--log-level", "error", "search", "--model", "Qwen3-0.6B", "--system", "a100_sxm_80g",
                           "--devices", "8", "--vary", "hidden_dropout=true,false", "--quiet", "--out",
                           str(tmp_path / "s.h5")], env=env,
                          stdout=subprocess.DEVNULL)
    subprocess.check_call([CLI, "--log-level", "error", "calibrate", "--platform", "gpu", "--models", "qwen3_0.6b_4k",
                           "--cv", "loo", "--out", str(tmp_path / "theta.json"), "--report", str(tmp_path / "c.h5")],
                          stdout=subprocess.DEVNULL)
    out = subprocess.check_output([CLI, "plot", str(tmp_path)]).decode()
    assert (tmp_path / "s_pareto.png").stat().st_size > 10000
    assert (tmp_path / "c_heldout.png").stat().st_size > 10000
    assert "wrote" in out
    bad = subprocess.run([CLI, "plot", str(tmp_path / "missing")], capture_output=True)
    assert bad.returncode == 2 and b"no such folder" in bad.stderr


FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "megatron")


def test_dataset_import_from_megatron_logs(tmp_path):
    import csv
    logs = sorted(glob.glob(os.path.join(FIXTURES, "*.log")))
    ds = tmp_path / "mine"
    for system in ("a100_sxm_80g", "h100_sxm_80g"):
        r = json.loads(subprocess.check_output([CLI, "dataset", "import", "--from", "megatron", *logs, "--out", str(ds),
                                                "--model-setting", "qwen3_0.6b_4k", "--model", "Qwen3-0.6B",
                                                "--system", system, "--json"]))
        assert r["configurations"] == 2 and r["platform"] == system
        # Each log's mixed fusion switches (SwiGLU and RoPE not logged, bias-dropout-add on) are said.
        assert len(r["warnings"]) == 2 and all("kernel fusions differ" in w for w in r["warnings"]), r["warnings"]
    coll = ds / "qwen3_0.6b_4k_a100_sxm_80g"
    step = {r["optimization_config"]: float(r["iteration_time_ms"]) for r in csv.DictReader(open(coll / "step_time_summary.csv"))}
    # Medians of the logged intervals after the first (which includes start-up).
    assert step == {"dp8-tp1-pp1-cp1-noRC": 2025.0, "dp2-tp2-pp2-cp1-RC-mbs1-sp": 5400.0}
    mem = [(r["optimization_config"], r["rank_id"], float(r["peak_memory_mb"]))
           for r in csv.DictReader(open(coll / "peak_memory.csv"))]
    assert ("dp2-tp2-pp2-cp1-RC-mbs1-sp", "0", 15500.0) in mem and ("dp2-tp2-pp2-cp1-RC-mbs1-sp", "2", 13000.0) in mem
    settings = json.load(open(coll / "training_settings.json"))
    assert settings["seq_length"] == 4096 and settings["micro_batch_size"] == 2 and settings["precision"] == "bf16"
    # The fixtures log no SwiGLU or RoPE fusion switch (Megatron-LM before January 2024): Qwen3 ran them unfused.
    assert settings["fused_kernels"] is False
    # Platforms named by system presets: calibrate on one, shortlist from A100 to H100.
    info = json.loads(subprocess.check_output([CLI, "dataset", "info", str(ds), "--json"]))
    assert sorted(c["platform"] for c in info["collections"]) == ["a100_sxm_80g", "h100_sxm_80g"]
    sl = subprocess.run([CLI, "--log-level", "error", "shortlist", "--dataset", str(ds), "--from", "a100_sxm_80g",
                         "--to", "h100_sxm_80g", "--k", "1", "--json"], capture_output=True)
    assert sl.returncode == 0, sl.stderr
    # Bad input: the wrong model (layer count) names the log and the argument; nothing is written.
    bad = subprocess.run([CLI, "dataset", "import", "--from", "megatron", logs[0], "--out", str(tmp_path / "x"),
                          "--model-setting", "m", "--model", "Qwen3-8B", "--system", "a100_sxm_80g"],
                         capture_output=True)
    assert bad.returncode == 2 and b"num_layers" in bad.stderr and not (tmp_path / "x" / "m_a100_sxm_80g").exists()
    # A log whose positions are not the model's: learned for Qwen3's rotary ones (named with its line); rope reads.
    for pos, code in (("learned_absolute", 2), ("rope", 0)):
        log = tmp_path / ("pos_" + pos + ".log")
        log.write_text(open(logs[0]).read().replace(
            "  bf16 ............................................ True\n",
            "  bf16 ............................................ True\n  position_embedding_type ........ " + pos + "\n"))
        r = subprocess.run([CLI, "dataset", "import", "--from", "megatron", str(log), "--out", str(tmp_path / pos),
                            "--model-setting", "m", "--model", "Qwen3-0.6B", "--system", "a100_sxm_80g"],
                           capture_output=True)
        assert r.returncode == code, r.stderr
        if code:
            assert b"position_embedding_type" in r.stderr and b"learned_absolute.log:4:" in r.stderr, r.stderr
    # Settings a configuration name does not carry must agree: one collection, one set of training settings.
    no_dropout = tmp_path / "no_dropout.log"
    no_dropout.write_text(open(logs[0]).read().replace(
        "  bf16 ............................................ True\n",
        "  bf16 ............................................ True\n  hidden_dropout ...... 0.0\n  attention_dropout ... 0.0\n"))
    bad = subprocess.run([CLI, "dataset", "import", "--from", "megatron", logs[1], str(no_dropout), "--out",
                          str(tmp_path / "z"), "--model-setting", "m", "--model", "Qwen3-0.6B", "--system", "a100_sxm_80g"],
                         capture_output=True)
    assert bad.returncode == 2 and b"differ" in bad.stderr and b"(hidden_dropout, attention_dropout)" in bad.stderr
    assert not (tmp_path / "z").exists()
    truncated = tmp_path / "t.log"
    truncated.write_text(open(logs[0]).read().split("end of arguments")[0])
    bad = subprocess.run([CLI, "dataset", "import", "--from", "megatron", str(truncated), "--out", str(tmp_path / "y"),
                          "--model-setting", "m", "--model", "Qwen3-0.6B", "--system", "a100_sxm_80g"],
                         capture_output=True)
    assert bad.returncode == 2 and b"t.log" in bad.stderr


def test_dataset_import_from_megatron_bridge_logs(tmp_path):
    import csv
    bridge = os.path.join(os.path.dirname(__file__), "fixtures", "megatron_bridge")
    common = ["--model-setting", "qwen3_0.6b_4k", "--model", "Qwen3-0.6B", "--system", "h100_sxm_80g"]
    # The summary form does not log the world size: refused without --devices, nothing written.
    bad = subprocess.run([CLI, "dataset", "import", "--from", "megatron-bridge", os.path.join(bridge, "run_summary.log"),
                          "--out", str(tmp_path / "x"), *common], capture_output=True)
    assert bad.returncode == 2 and b"pass --devices" in bad.stderr and not (tmp_path / "x").exists()
    for log, extra in (("run_summary.log", ["--devices", "8"]), ("run_yaml.log", [])):
        ds = tmp_path / log
        r = json.loads(subprocess.check_output([CLI, "dataset", "import", "--from", "megatron-bridge",
                                                os.path.join(bridge, log), "--out", str(ds), *common, *extra, "--json"]))
        assert r["configurations"] == 1
        coll = ds / "qwen3_0.6b_4k_h100_sxm_80g"
        step = list(csv.DictReader(open(coll / "step_time_summary.csv")))
        assert step == [{"optimization_config": "dp2-tp2-pp2-cp1-selRC-vpp2", "iteration_time_ms": "5375.000"}]
        settings = json.load(open(coll / "training_settings.json"))
        assert settings["recompute_modules"] == ["core_attn", "mlp"] and settings["hidden_dropout"] is False
        # No fusion switch in the configuration: Megatron-core's defaults, all off (Bridge's Qwen3 provider sets none).
        assert settings["fused_kernels"] is False
        assert "Megatron-Bridge" in settings["note"]
        assert settings["nccl_nvls_enable"] is True  # no log records NCCL's environment: NCCL's default
    # What the logs do not record, given: the launcher's NCCL_NVLS_ENABLE=0 reaches the collection's settings and its
    # note; what a configuration name or the sizes carry stays each log's (refused, nothing written).
    ds = tmp_path / "nvls"
    subprocess.check_output([CLI, "dataset", "import", "--from", "megatron-bridge", os.path.join(bridge, "run_yaml.log"),
                             "--out", str(ds), *common, "--set", "nccl_nvls_enable=false"])
    settings = json.load(open(ds / "qwen3_0.6b_4k_h100_sxm_80g" / "training_settings.json"))
    assert settings["nccl_nvls_enable"] is False and "--set nccl_nvls_enable=false" in settings["note"], settings
    for pair, field in (("sequence_parallel=true", b"sequence_parallel"), ("nccl_nvls_enable=maybe", b"nccl_nvls_enable")):
        bad = subprocess.run([CLI, "dataset", "import", "--from", "megatron-bridge", os.path.join(bridge, "run_yaml.log"),
                              "--out", str(tmp_path / "refused"), *common, "--set", pair], capture_output=True)
        assert bad.returncode == 2 and field in bad.stderr and not (tmp_path / "refused").exists(), bad.stderr
        info = json.loads(subprocess.check_output([CLI, "dataset", "info", str(ds), "--json"]))
        assert len(info["collections"]) == 1


def test_recompute_spelled_either_way():
    a = lmsim.predict(**{**KW, "strategy": "dp2-tp4-pp1-cp1-full"})
    b = lmsim.predict(**KW)
    assert a["iteration_time_s"] == b["iteration_time_s"] and a["strategy"] == b["strategy"]
    c = lmsim.predict(**{**KW, "strategy": "dp2-tp4-pp1-cp1-selective"})
    assert c["strategy"] == "dp2-tp4-pp1-cp1-selRC"
    # Partial full recompute (Megatron's --recompute-method block): between no recompute and full in time.
    t = {rc: lmsim.predict(**{**KW, "strategy": "dp2-tp2-pp2-cp1-" + rc})["iteration_time_s"]
         for rc in ("none", "full", "full-block7")}
    assert t["none"] < t["full-block7"] < t["full"]
    assert lmsim.predict(**{**KW, "strategy": "dp2-tp2-pp2-cp1-full-block7"})["strategy"] == "dp2-tp2-pp2-cp1-RC-block7"


def test_evaluate_uses_and_names_the_shipped_theta_by_default():
    e = run_cli("evaluate", "--models", "qwen3_0.6b_4k")
    assert all("fitted θ shipped for" in x["theta_source"] for x in e)
    assert all(x["time_mape_pct"] < 8 for x in e)  # not the uncalibrated defaults (20-40 %)


def test_models_reads_huggingface_configs():
    hf = os.path.join(os.path.dirname(__file__), "fixtures", "hf")
    d = lmsim.models(model=[os.path.join(hf, "gemma3_1b", "config.json"), "Llama-3-8B"])
    assert [m["name"] for m in d] == ["gemma3_1b", "Llama-3-8B"]
    assert d[0]["window_attn_skip_freq"] == 6 and d[0]["card_total_params"] is None
    assert abs(d[0]["total_params"] / 1e9 - 1.0) < 0.02 and d[1]["card_total_params"] > 0


def test_set_changes_one_setting_as_the_cli_does():
    kw = dict(model="Llama-3-8B", system="h100_sxm_80g", strategy="dp2-tp4-pp1-cp1-RC-nosp", seq=8192, global_batch=64)
    plain = lmsim.predict(**kw)
    d = lmsim.predict(**kw, set=["distribute_saved_activations=true", 'recompute_modules=["mlp"]'])
    assert d["settings"]["distribute_saved_activations"] and d["settings"]["recompute_modules"] == ["mlp"]
    assert d["max_peak_memory_bytes"] < plain["max_peak_memory_bytes"]
    c = cli("--model", "Llama-3-8B", "--system", "h100_sxm_80g", "--strategy", "dp2-tp4-pp1-cp1-RC-nosp", "--seq", "8192",
            "--global-batch", "64", "--set", "distribute_saved_activations=true", "--set", 'recompute_modules=["mlp"]')
    assert c["iteration_time_s"] == d["iteration_time_s"]
    s = lmsim.search(model="Llama-3-8B", system="h100_sxm_80g", devices=8, seq=8192, global_batch=64, top=3,
                     recompute="full", sp="off", set=["distribute_saved_activations=true", "cp_comm_type=p2p"])
    assert s["ranking"]
    with pytest.raises(ValueError, match="--set: field 'nosuch'"):
        lmsim.predict(**kw, set="nosuch=1")


def test_vary_sweeps_settings_as_scenarios():
    # Each --vary is one option (its values hold commas): a list gives one per item, as for --set.
    s = lmsim.search(model="Llama-3-8B", system="h100_sxm_80g", devices=8, seq=8192, global_batch=64, top=3,
                     vary=["precision=bf16,fp8", 'recompute_modules=["mlp"],["core_attn","mlp"]'])
    labels = [b["scenario"].split("gbs64/")[1] for b in s["best_per_scenario"]]
    assert labels == ['precision=bf16/recompute_modules=["mlp"]', 'precision=bf16/recompute_modules=["core_attn","mlp"]',
                      'precision=fp8/recompute_modules=["mlp"]', 'precision=fp8/recompute_modules=["core_attn","mlp"]']
    with pytest.raises(ValueError, match="sequence_parallel has its own option: --sp"):
        lmsim.search(model="Llama-3-8B", system="h100_sxm_80g", devices=8, vary="sequence_parallel=true,false")
