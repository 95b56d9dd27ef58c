#!/usr/bin/env python3
"""A second reader of bitsandbytes and GPTQ safetensors files, written from
the specs (docs/bnb.md, docs/gptq.md) in Python with numpy only, for
`quantdiff test-impl` (issue 13):

    quantdiff test-impl --format bnb,gptq \
      --cmd 'python3 examples/py_reader/read.py {input} {output}'

Exit 0 with the F32 decode at OUTPUT, exit 1 with 'RULE-ID text' on
standard error for a refused file. --broken FAULT plants one fault
(bnb.BROKEN lists them) so that a test can hold test-impl to naming exactly
the vectors that fault breaks.
"""
import argparse
import os
import sys

import bnb
import gptq
from st_io import FLOATING, Refusal, ReadSafetensors, ToF32, WriteF32


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--broken", choices=["fp4-code8-negzero", "nibble-order"])
    args = parser.parse_args()
    if args.broken:
        bnb.BROKEN.add(args.broken)
    with open(args.input, "rb") as f:
        data = f.read()
    try:
        tensors, metadata = ReadSafetensors(data)
        outputs = bnb.DecodeTable(tensors, metadata)
        if outputs is None:
            outputs = gptq.Decode(tensors, gptq.ConfigSources(args.input))
        if outputs is None:
            outputs = [(n, t.shape, ToF32(t)) for n, t in tensors.items() if t.dtype in FLOATING]
    except Refusal as r:
        print(f"{os.path.basename(args.input)}: {r}", file=sys.stderr)
        return 1
    WriteF32(args.output, outputs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
