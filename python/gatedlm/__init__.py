"""gatedlm from Python: load, run, probe, train and sample the engine's models.

The classes and functions here call the same C++ library the ``gatedlm`` command line
runs (no second implementation); errors carry the command line's messages.

    import gatedlm
    model = gatedlm.Model.load("runs/demo/runs/gated")           # checkpoint or run dir
    tok = gatedlm.Tokenizer("byte")
    ids = tok.encode("The quick brown fox", bos=True)
    out = model.forward(ids, capture=["attention", "gate_scores"])
    out["logits"].shape, out["attention"].shape                  # [T, V], [L, H, T, T]
    model.score(ids)["mean_loss"]
    for piece in model.generate("Once upon", max_tokens=40, seed=1, tokenizer=tok):
        print(piece, end="")

See docs/python.md for the whole API.
"""
from __future__ import annotations

import json
import os
import queue
import tempfile
import threading
from typing import Any, Callable, Dict, Iterator, Optional, Union

from ._gatedlm import Error, Generation, Model, PathNotFoundError, Tokenizer
from ._gatedlm import _train, prepare_data

__all__ = ["Error", "PathNotFoundError", "Model", "Tokenizer", "Generation", "prepare_data", "train", "train_steps"]

PathLike = Union[str, "os.PathLike[str]"]


def train(config: Union[PathLike, Dict[str, Any], None], data: Optional[PathLike], out: PathLike, *,
          callback: Optional[Callable[[Dict[str, Any]], Optional[bool]]] = None, resume: bool = False,
          init_from: Optional[PathLike] = None, train_config: Union[PathLike, Dict[str, Any], None] = None,
          **flags: Any) -> Dict[str, Any]:
    """Trains a model as ``gatedlm train`` does, into the run directory ``out``.

    config: the model config (a dict of config.json keys, or its path); None with resume=True.
    data: a dataset directory from ``gatedlm data prepare`` (optional on resume).
    flags: the hyper-parameters of ``gatedlm train`` with underscores (steps=200, lr=3e-4,
    batch_size=8, seq_len=128, eval_every=50, probe_every=25, ...), on top of train_config
    (a dict or a training-config JSON file). The same config, data and flags give the same
    run as the command line, bit for bit (with the same OMP_NUM_THREADS).

    callback(record) is called with every record written to RUN/metrics.jsonl: steps
    ({"step", "loss", "lr", "grad_norm", "tokens_per_s", ...}), evaluations ({"val_loss",
    ...}) and probes ({"f_attn", "m_act", ...}). Returning False stops the run like Ctrl-C:
    checkpointed and resumable. An exception in the callback stops the run the same way and
    is then re-raised.

    Ctrl-C (SIGINT) saves a checkpoint and raises KeyboardInterrupt; continue with
    ``gatedlm.train(None, None, out, resume=True)``. Returns RUN/summary.json as a dict,
    with "run": out.
    """
    if isinstance(config, dict):
        with tempfile.TemporaryDirectory(prefix="gatedlm-config-") as tmp:
            path = os.path.join(tmp, "config.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(config, f)
            return _train(path, data, out, callback=callback, resume=resume, init_from=init_from,
                          train_config=train_config, **flags)
    return _train(config, data, out, callback=callback, resume=resume, init_from=init_from,
                  train_config=train_config, **flags)


def train_steps(config: Union[PathLike, Dict[str, Any], None], data: Optional[PathLike], out: PathLike,
                **kwargs: Any) -> Iterator[Dict[str, Any]]:
    """gatedlm.train as an iterator of its metrics.jsonl records, for a notebook that plots
    while the run goes on (the training runs in a thread; the records arrive as they are
    written). Arguments as train(); the last item is the summary dict, with "summary": True.
    Breaking out of the loop stops the run at the next step, checkpointed and resumable.
    """
    records: "queue.Queue[tuple]" = queue.Queue()
    stop = threading.Event()

    def on_record(rec: Dict[str, Any]) -> bool:
        records.put(("record", rec))
        return not stop.is_set()

    def run() -> None:
        try:
            records.put(("done", train(config, data, out, callback=on_record, **kwargs)))
        except BaseException as e:  # handed to the consumer
            records.put(("error", e))

    worker = threading.Thread(target=run, name="gatedlm-train", daemon=True)
    worker.start()
    try:
        while True:
            kind, value = records.get()
            if kind == "record":
                yield value
            elif kind == "done":
                yield dict(value, summary=True)
                return
            else:
                raise value
    finally:
        stop.set()
        worker.join()
