"""The example examples/gated_vs_baseline.py runs end to end on a tiny budget."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "gated_vs_baseline.py")


def test_example_trains_both_models_and_plots(work, text_file):
    out = work / "example"
    r = subprocess.run([sys.executable, EXAMPLE, "--tiny", "--steps", "3", "--corpus", str(text_file), "--out",
                        str(out)], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert "baseline: 3 steps" in r.stdout and "gated: 3 steps" in r.stdout
    assert "gate score" in r.stdout  # the gated model's analysis has gate statistics
    figure = out / "gated_vs_baseline.png"
    assert figure.exists() and figure.stat().st_size > 10000


def test_sink_patching_example_runs_on_two_tiny_models(work):
    """examples/sink_patching.py: ablation, patching and the gate clamped open, on random models."""
    out = work / "sink-patching"
    example = os.path.join(HERE, "..", "..", "examples", "sink_patching.py")
    r = subprocess.run([sys.executable, example, "--tiny", "--windows", "4", "--out", str(out)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "L1H1" in r.stdout and "F-Attn gated, gate clamped open" in r.stdout
    # Same seed, same weights but the gate: clamped open, the gated model attends as the baseline.
    lines = {l.split(":")[0]: l.split(":")[1].split() for l in r.stdout.splitlines() if l.startswith("F-Attn")}
    assert lines["F-Attn gated, gate clamped open"] == lines["F-Attn baseline"]
    assert (out / "sink_patching.png").stat().st_size > 10000
