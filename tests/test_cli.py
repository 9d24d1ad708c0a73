"""The command line: reports, exit statuses and one-line errors (contract: docs/cli.md)."""

import json
import os
import subprocess
import sys

import pytest

from daskhpc.cli import main


def run_cli(capsys, *argv):
    status = main(list(map(str, argv)))
    out, err = capsys.readouterr()
    return status, out, err


def test_partition_report(shared_data, tmp_path, capsys):
    out_json, saved = tmp_path / "out.json", tmp_path / "parts.txt"
    status, out, err = run_cli(
        capsys, "partition", "column-net", shared_data / "ratings/ml-latest-small/ratings.csv",
        "--parts", 4, "--objective", "soed", "--json", out_json, "--save-partition", saved)
    assert status == 0, err
    assert "km1" in out and "soed" in out and "imbalance" in out
    report = json.loads(out_json.read_text())
    assert report["workflow"] == "partition" and report["version"] == "0.1.0"
    assert report["input"] == {"path": str(shared_data / "ratings/ml-latest-small/ratings.csv"),
                               "shape": [610, 9724], "nnz": 100836}
    assert report["parts"] == 4 and report["partitioner"] == "mtkahypar"
    assert report["objective"] == "soed" and report["seed"] == 0
    part = report["partition"]
    assert {"imbalance", "km1", "soed", "cut"} <= set(part) and part["balanced"]
    assert part["soed"] == part["km1"] + part["cut"]  # SOED = km1 + cut for unit costs
    assert len(saved.read_text().split()) == 610


@pytest.mark.parametrize("partitioner", [
    pytest.param("mtkahypar", marks=pytest.mark.slow), "random",
    pytest.param("graph", marks=pytest.mark.slow)])
def test_partition_slashdot(shared_data, tmp_path, capsys, partitioner):
    """The issue's command on soc-Slashdot0902 (the fast preset keeps the test short)."""
    out_json = tmp_path / "out.json"
    extra = ["--preset", "default"] if partitioner == "mtkahypar" else []
    status, out, err = run_cli(capsys, "partition", "column-net",
                               shared_data / "graphs/soc-Slashdot0902.txt.gz", "--parts", 8,
                               "--partitioner", partitioner, "--json", out_json, *extra)
    assert status == 0, err
    part = json.loads(out_json.read_text())["partition"]
    assert part["balanced"] and part["km1"] > 0
    assert out.count("\n") == 3  # header, rule, one row


@pytest.mark.slow
def test_partition_slashdot_exact_issue_command(shared_data, tmp_path):
    out_json = tmp_path / "out.json"
    # the console script of this environment (its bin/ need not be on PATH)
    exe = os.path.join(os.path.dirname(sys.executable), "daskhpc")
    subprocess.run([exe, "partition", "column-net",
                    str(shared_data / "graphs/soc-Slashdot0902.txt.gz"), "--parts", "8",
                    "--json", str(out_json)], check=True)
    assert json.loads(out_json.read_text())["partition"]["balanced"]


def test_tensor_models(shared_data, tmp_path, capsys):
    for model in ["tensor-fine", "tensor-coarse"]:
        out_json = tmp_path / f"{model}.json"
        status, _, err = run_cli(capsys, "partition", model,
                                 shared_data / "tensors/umls_head_rel_tail.tns", "--parts", 3,
                                 "--json", out_json)
        assert status == 0, err
        report = json.loads(out_json.read_text())
        assert report["model"]["name"] == model
    assert "fine_grain_volume" in json.loads((tmp_path / "tensor-fine.json").read_text())["partition"]
    coarse = json.loads((tmp_path / "tensor-coarse.json").read_text())
    assert len(coarse["partition"]["imbalance_per_constraint"]) == 3


def test_graph_model_is_edge_cut(shared_data, tmp_path, capsys):
    out_json = tmp_path / "g.json"
    status, _, err = run_cli(capsys, "partition", "graph", shared_data / "matrices/bcsstk13.mtx",
                             "--parts", 4, "--partitioner", "graph", "--json", out_json)
    assert status == 0, err
    part = json.loads(out_json.read_text())["partition"]
    assert part["cut"] == part["km1"]  # 2-pin nets: cut net count equals connectivity - 1


def test_bad_input_exits_2_with_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.mtx"
    bad.write_text("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1.0\n4 1 2.0\n")
    status, out, err = run_cli(capsys, "partition", "column-net", bad, "--parts", 2)
    assert status == 2
    assert err.startswith("daskhpc: error: ") and f"{bad}:4:" in err
    assert "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize("argv, message", [
    (["partition", "column-net", "{tns}", "--parts", "2"], "needs a matrix input"),
    (["partition", "tensor-fine", "{mtx}", "--parts", "2"], "needs a tensor"),
    (["partition", "column-net", "{mtx}", "--parts", "5000"], "more parts (5000) than vertices"),
    (["partition", "column-net", "{missing}", "--parts", "2"],
     "missing.mtx: no such file or directory"),
    (["plan", "nosuchworkflow", "x"], "invalid choice"),
    (["partition", "hyper", "{mtx}", "--parts", "2"], "invalid choice"),
])
def test_usage_errors_exit_2(shared_data, tmp_path, capsys, argv, message):
    subst = {"{tns}": str(shared_data / "tensors/nations_head_rel_tail.tns"),
             "{mtx}": str(shared_data / "matrices/bcsstk13.mtx"),
             "{missing}": str(tmp_path / "missing.mtx")}
    status, out, err = run_cli(capsys, *[subst.get(a, a) for a in argv])
    assert status == 2
    assert message in err and "Traceback" not in err


def test_info_json(tmp_path, capsys):
    out_json = tmp_path / "info.json"
    status, out, _ = run_cli(capsys, "info", "--json", out_json)
    assert status == 0 and "partitioners: mtkahypar, kahypar" in out
    info = json.loads(out_json.read_text())
    assert info["partitioners"]["mtkahypar"] and info["packages"]["numpy"]


def test_console_script_is_installed():
    out = subprocess.run([sys.executable, "-m", "daskhpc.cli", "--version"], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == "daskhpc 0.1.0"


def test_summarize_is_a_short_human_block():
    from daskhpc.report import summarize

    text = summarize({"workflow": "x", "input": {"path": "/data/a.mtx", "shape": [2, 3],
                                                 "nnz": 4000},
                      "parts": 2, "partition": {"partitioner": "mtkahypar", "km1": 1234,
                                                "imbalance": 0.0312},
                      "plan": {"tot_vol": 5, "steps": {"a": 1}},
                      "measured": {"planned_bytes": 5_324_800, "planned_messages": 28,
                                   "inter_worker_bytes": 5_330_922,
                                   "inter_worker_messages": 28},
                      "timing": {"run_s": 0.5, "partition_s": 1.25},
                      "quality": {"rmse": 0.8123, "definition": "a long sentence"},
                      "serial_check": {"done": True, "identical": False, "max_abs_diff": 2e-16,
                                       "within_tolerance": True, "rtol": 1e-12}})
    assert text.splitlines() == [
        "x: a.mtx, 2 x 3, 4,000 nonzeros, 2 parts",
        "  partition  mtkahypar, km1 1,234, imbalance 3.1%",
        "  traffic    planned 5.32 MB in 28 messages, measured 5.33 MB in 28 (1.00x the plan)",
        "  time       run 0.50 s (partition 1.25 s)",
        "  quality    rmse 0.8123",
        "  serial     within rtol 1e-12 (max |diff| 2e-16) of the serial reference"]


def test_summarize_of_a_plan_and_of_a_failed_check():
    from daskhpc.report import summarize

    text = summarize({"workflow": "x", "plan": {"tot_vol": 7170, "tot_msgs": 4, "max_vol": 3585,
                                                "max_msgs": 2, "unit": "rows",
                                                "planned_bytes": 917760},
                      "serial_check": {"done": True, "identical": False, "max_abs_diff": 0.5}})
    assert "  plan       7,170 rows in 4 messages (max per part: 3,585 rows, 2 messages), " \
           "918 kB" in text
    assert "  serial     DIFFERS (max |diff| 0.5) from the serial reference" in text
