"""Hardening, third round, row 1: the interpreter aborted at exit ("terminate called without
an active exception", SIGABRT) when a daemon thread was inside generate(), inside
train(callback=...), or held a suspended train_steps iterator. Each case runs in a child
interpreter that exits while the thread is busy in the engine; it must exit 0, quietly.
Three times each: the abort depended on where the thread was when the exit came. And an
atexit handler that runs after the module's own (registered before gatedlm was imported)
may still use the engine on the main thread."""
import subprocess
import sys
import textwrap

import pytest

import gatedlm

CHILD = textwrap.dedent("""
    import atexit, os, sys, threading, time
    sys.path[:0] = [{path!r}]
    late = {{}}  # registered before gatedlm's own hook, so it runs after it

    def late_use():
        if "model" in late:
            print("late", len("".join(late["model"].generate("it", max_tokens=4, temperature=0))) >= 0, flush=True)

    atexit.register(late_use)
    import gatedlm
    case, checkpoint, dataset, work = sys.argv[1:5]
    CONFIG = {config!r}
    FLAGS = dict(steps=50, batch_size=2, seq_len=32, warmup=1, eval_every=0, save_every=0, probe_every=0)
    started = threading.Event()

    def generating():
        model = gatedlm.Model.load(checkpoint, tokenizer="byte")
        while True:
            started.set()
            list(model.generate("it was the", max_tokens=40, temperature=0.8))

    def training():
        runs = 0
        while True:
            runs += 1
            gatedlm.train(CONFIG, dataset, os.path.join(work, f"train_{{runs}}"),
                          callback=lambda rec: started.set() or time.sleep(0.001), **FLAGS)

    if case == "late_atexit":
        late["model"] = gatedlm.Model.load(checkpoint, tokenizer="byte")
        threading.Thread(target=generating, daemon=True).start()
        started.wait(60)
    elif case == "iterator":
        steps = gatedlm.train_steps(CONFIG, dataset, os.path.join(work, "iter"), **FLAGS)
        next(steps)  # suspended, never closed
    else:
        threading.Thread(target=generating if case == "generate" else training, daemon=True).start()
        started.wait(60)
    time.sleep(0.05)
    print("exiting", flush=True)
""")


@pytest.mark.parametrize("case", ["generate", "train", "iterator", "late_atexit"])
def test_exit_while_a_daemon_thread_is_in_the_engine(case, gated_checkpoint, dataset, tmp_path):
    from conftest import GATED

    package = str(__import__("pathlib").Path(gatedlm.__file__).parent.parent)
    script = CHILD.format(path=package, config=GATED)
    for attempt in range(3):
        work = tmp_path / f"{case}_{attempt}"
        work.mkdir()
        p = subprocess.run([sys.executable, "-c", script, case, str(gated_checkpoint), str(dataset), str(work)],
                           capture_output=True, text=True, timeout=180)
        assert "exiting" in p.stdout, p.stderr[-2000:]
        assert p.returncode == 0, f"attempt {attempt}: exit {p.returncode}\n{p.stderr[-2000:]}"
        assert "terminate called" not in p.stderr, p.stderr[-2000:]
        if case == "late_atexit":  # the main thread still runs the engine after the hook
            assert "late True" in p.stdout, p.stdout
