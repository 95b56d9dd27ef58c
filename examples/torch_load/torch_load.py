#!/usr/bin/python3
"""torch.load(weights_only=True) under `quantdiff test-impl` (issue 13).

    quantdiff test-impl --format pt \
      --cmd '/usr/bin/python3 examples/torch_load/torch_load.py {input} {output}'

An adapter, not a reader: torch (Debian's python3-torch 1.13.1) reads the
file with its own restricted unpickler, and whatever torch.load returns is
reported as accepted. Exit 1 when torch.load raises (no rule ID is claimed:
torch has none, so test-impl compares the verdict only). The state dict is
then laid out as quantdiff's decode lays it out (docs/pt.md 6.1, 6.3):
nested dicts flattened with '.', int keys as decimals, floating tensors to
binary32, integer and bool tensors left out; a file holding bitsandbytes
layers is decoded by examples/py_reader's bitsandbytes reader over that
tensor table (docs/pt.md 6.4), whose refusals do carry its rule ID; the
older QuantState list layout (docs/pt.md 7) is not read (exit 3).
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "py_reader"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import bnb  # noqa: E402
from st_io import FLOATING, Refusal, Tensor, ToF32, WriteF32  # noqa: E402

TORCH_DTYPES = {
    torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL",
}


def TableEntry(t, order):
    """A loaded tensor as a table entry: C-order little-endian bytes."""
    dtype = TORCH_DTYPES[t.dtype]
    c = t.detach().contiguous()
    raw = c.view(torch.int16) if dtype == "BF16" else c
    return Tensor(dtype, list(t.shape), raw.numpy().tobytes(), order)


def Flatten(d, prefix, tensors, values):
    for key, value in d.items():
        name = prefix + str(key)
        if isinstance(value, dict):
            Flatten(value, name + ".", tensors, values)
        elif isinstance(value, torch.Tensor):
            tensors[name] = TableEntry(value, len(tensors))
        else:
            values[name] = value


def main(argv):
    if len(argv) != 3:
        print("usage: torch_load.py INPUT OUTPUT", file=sys.stderr)
        return 2
    try:
        root = torch.load(argv[1], map_location="cpu", weights_only=True)
    except Exception as e:  # torch's refusal, whatever its kind
        print(f"torch.load refused: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
              file=sys.stderr)
        return 1
    tensors, values = {}, {}
    if isinstance(root, dict):
        Flatten(root, "", tensors, values)
    if any(n.endswith(".quant_state") and isinstance(v, (list, tuple)) for n, v in values.items()):
        # docs/pt.md 7: examples/py_reader reads the dict layout only. Exit 3
        # (test-impl: crashed) says "not judged", never a verdict.
        print("torch_load.py: bitsandbytes QuantState list layout is not read by this adapter", file=sys.stderr)
        return 3
    try:
        outputs = bnb.DecodeTable(tensors, {}, values)
    except Refusal as r:
        print(r, file=sys.stderr)
        return 1
    if outputs is None:  # no bitsandbytes layer: docs/pt.md 6.3
        outputs = [(n, t.shape, ToF32(t)) for n, t in tensors.items() if t.dtype in FLOATING]
    WriteF32(argv[2], outputs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
