"""Minimal safetensors reader/writer (no dependency on the `safetensors` package).

File layout:
    8 bytes   little-endian unsigned header length N
    N bytes   JSON header: {name: {"dtype": ..., "shape": [...], "data_offsets": [begin, end]},
                            optional "__metadata__": {str: str}}
    rest      raw little-endian tensor data; offsets are relative to the start of this
              section; tensors are contiguous and together cover the section exactly.

`save` writes F32 only (tensors are converted). `load` reads F32, F64, I64, I32
and validates the header against the file size.
"""

import json
import os
import struct

import numpy as np
import torch

_DTYPES = {
    "F32": (np.dtype("<f4"), torch.float32),
    "F64": (np.dtype("<f8"), torch.float64),
    "I64": (np.dtype("<i8"), torch.int64),
    "I32": (np.dtype("<i4"), torch.int32),
}

# A header larger than this is certainly a corrupt file for this project.
_MAX_HEADER = 100 * 1024 * 1024


class SafetensorsError(ValueError):
    pass


def load(path, return_metadata=False):
    """Read a safetensors file into an ordered dict name -> torch.Tensor (CPU, own memory)."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise SafetensorsError(f"{path}: file too small ({len(blob)} bytes)")
    (hlen,) = struct.unpack("<Q", blob[:8])
    if hlen > _MAX_HEADER or 8 + hlen > len(blob):
        raise SafetensorsError(f"{path}: header length {hlen} exceeds file size {len(blob)}")
    try:
        header = json.loads(blob[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: bad JSON header: {e}") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is not None and not isinstance(metadata, dict):
        raise SafetensorsError(f"{path}: __metadata__ is not an object")
    data = memoryview(blob)[8 + hlen:]
    data_len = len(data)

    spans = []
    out = {}
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorsError(f"{path}: tensor {name!r}: bad entry {info!r}")
        dt = info["dtype"]
        if dt not in _DTYPES:
            raise SafetensorsError(f"{path}: tensor {name!r}: unsupported dtype {dt!r}")
        shape = info["shape"]
        offs = info["data_offsets"]
        if (not isinstance(shape, list) or
                not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)):
            raise SafetensorsError(f"{path}: tensor {name!r}: bad shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            raise SafetensorsError(f"{path}: tensor {name!r}: bad data_offsets {offs!r}")
        begin, end = offs
        npdt, tdt = _DTYPES[dt]
        numel = 1
        for s in shape:
            numel *= s
        if not (0 <= begin <= end <= data_len):
            raise SafetensorsError(
                f"{path}: tensor {name!r}: offsets {offs} outside data section of {data_len} bytes")
        if end - begin != numel * npdt.itemsize:
            raise SafetensorsError(
                f"{path}: tensor {name!r}: {end - begin} bytes for shape {shape} {dt} "
                f"(expected {numel * npdt.itemsize})")
        spans.append((begin, end, name))
        arr = np.frombuffer(data[begin:end], dtype=npdt).reshape(shape)
        out[name] = torch.from_numpy(arr.astype(npdt.newbyteorder("="), copy=True))

    # Tensors must tile the data section exactly: no overlap, no holes, nothing trailing.
    pos = 0
    for begin, end, name in sorted(spans):
        if begin != pos:
            what = "overlaps the previous tensor" if begin < pos else "leaves a gap"
            raise SafetensorsError(f"{path}: tensor {name!r} at {begin} {what} (expected {pos})")
        pos = end
    if pos != data_len:
        raise SafetensorsError(
            f"{path}: tensors cover {pos} bytes but the data section has {data_len}")
    if return_metadata:
        return out, metadata
    return out


def save(path, tensors, metadata=None):
    """Write name -> tensor (any float/int tensor; stored as F32) in the dict's order."""
    header = {}
    chunks = []
    pos = 0
    for name, t in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise SafetensorsError(f"bad tensor name {name!r}")
        if isinstance(t, torch.Tensor):
            arr = t.detach().to("cpu", torch.float32).contiguous().numpy()
        else:
            arr = np.asarray(t, dtype=np.float32)
        raw = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [pos, pos + len(raw)]}
        chunks.append(raw)
        pos += len(raw)
    if metadata is not None:
        header = {"__metadata__": {str(k): str(v) for k, v in metadata.items()}, **header}
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * ((-len(hbytes)) % 8)  # pad so the data section is 8-byte aligned
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)
