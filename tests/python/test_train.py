"""gatedlm.train against `gatedlm train` (bit for bit), its callback, and Ctrl-C + resume."""
import json
import os
import signal

import numpy as np
import pytest

import gatedlm
from conftest import GATED

FLAGS = dict(steps=4, batch_size=2, seq_len=32, warmup=1, eval_every=2, eval_tokens=256, save_every=0, seed=3,
             probe_every=2, probe_windows=2)


def cli_flags(flags):
    out = []
    for k, v in flags.items():
        out += ["--" + k.replace("_", "-"), str(v)]
    return out


def weights(run):
    return {k: v.copy() for k, v in gatedlm.Model.load(run).params().items()}


def records(run):
    with open(os.path.join(run, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def numbers(recs):
    keep = ("step", "loss", "lr", "grad_norm", "val_loss", "f_attn", "m_act")
    return [{k: r[k] for k in keep if k in r} for r in recs]


@pytest.fixture(scope="module")
def cli_run(work, gated_config, dataset, run_cli):
    out = work / "cli_run"
    run_cli("train", "--config", gated_config, "--data", dataset, "--out", out, *cli_flags(FLAGS))
    return out


def test_python_run_equals_cli_run(work, dataset, cli_run):
    seen = []
    summary = gatedlm.train(GATED, dataset, work / "py_run", callback=seen.append, **FLAGS)
    assert summary["outcome"] == "completed" and summary["steps"] == 4
    assert numbers(seen) == numbers(records(work / "py_run"))  # the callback saw every record
    assert [r["step"] for r in seen if "loss" in r] == [1, 2, 3, 4]
    assert numbers(records(work / "py_run")) == numbers(records(cli_run))
    mine, theirs = weights(work / "py_run"), weights(cli_run)
    for name in theirs:
        assert mine[name].tobytes() == theirs[name].tobytes(), name


def test_ctrl_c_leaves_a_resumable_run(work, dataset, cli_run):
    out = work / "interrupted_run"

    def interrupt_at_step_2(rec):
        if rec.get("step") == 2 and "loss" in rec:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        gatedlm.train(GATED, dataset, out, callback=interrupt_at_step_2, **FLAGS)
    assert json.load(open(out / "summary.json"))["outcome"] == "interrupted"
    summary = gatedlm.train(None, None, out, resume=True)
    assert summary["outcome"] == "completed" and summary["steps"] == 4
    mine, theirs = weights(out), weights(cli_run)
    for name in theirs:
        assert mine[name].tobytes() == theirs[name].tobytes(), name


def test_callback_exception_stops_and_is_raised(work, dataset):
    out = work / "raising_run"

    def boom(rec):
        if rec.get("step") == 1:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        gatedlm.train(GATED, dataset, out, callback=boom, **FLAGS)
    assert json.load(open(out / "summary.json"))["outcome"] == "interrupted"


def test_a_callbacks_stop_is_its_own_runs(work, dataset):
    """Hardening, third round, row 5: the stop a callback asks for was process-wide, and a
    training in another thread stopped with it (KeyboardInterrupt). Run A's callback returns
    False at step 1 once run B has reached its step 1; B must complete. Three times."""
    import threading

    for attempt in range(3):
        b_started, results = threading.Event(), {}

        def stop_a(rec):
            if rec.get("step") == 1 and "loss" in rec:
                b_started.wait(timeout=60)
                return False
            return None

        def note_b(rec):
            if rec.get("step") == 1 and "loss" in rec:
                b_started.set()

        def run(name, callback):
            try:
                results[name] = gatedlm.train(GATED, dataset, work / f"pair_{attempt}_{name}", callback=callback,
                                               **dict(FLAGS, probe_every=0))
            except BaseException as e:  # noqa: B036 -- KeyboardInterrupt is what the bug raised
                results[name] = e

        threads = [threading.Thread(target=run, args=("a", stop_a)), threading.Thread(target=run, args=("b", note_b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        assert isinstance(results["a"], dict) and results["a"]["outcome"] == "interrupted", results["a"]
        assert isinstance(results["b"], dict), f"attempt {attempt}: run B raised {results['b']!r}"
        assert results["b"]["outcome"] == "completed" and results["b"]["steps"] == 4, results["b"]


def test_a_nested_train_on_the_same_run_says_it_is_this_process(work, dataset):
    """Hardening, third round, row 9: a train started from another's callback on the same run
    directory named its own process as "another gatedlm process"."""
    out = work / "nested_run"

    def nested(rec):
        if rec.get("step") == 1 and "loss" in rec:
            gatedlm.train(None, None, out, resume=True)  # resuming takes the run's lock first

    with pytest.raises(gatedlm.Error, match="this process is already writing this run directory"):
        gatedlm.train(GATED, dataset, out, callback=nested, **dict(FLAGS, probe_every=0))


def test_train_steps_iterator(work, dataset):
    items = list(gatedlm.train_steps(GATED, dataset, work / "iter_run", **dict(FLAGS, probe_every=0)))
    assert items[-1]["summary"] and items[-1]["outcome"] == "completed"
    assert [r["step"] for r in items if "loss" in r] == [1, 2, 3, 4]


def test_run_directory_brings_its_tokenizer(cli_run):
    model = gatedlm.Model.load(cli_run)  # run.json names the byte dataset, as `gatedlm generate` finds it
    assert model.tokenizer is not None and model.tokenizer.name == "byte"
    gen = model.generate("it was", max_tokens=4, temperature=0)
    list(gen)
    assert len(gen.ids) + (gen.finish_reason == "eos") >= 1
