"""safetensors in and out, with numpy and the standard library only.

Read: the container as the safetensors format README describes it (an 8-byte
little-endian header length, a JSON header, the data), checked only as far as
this example reader needs; the container rules themselves are quantdiff's
`safetensors` format, not this reader's subject. Write: the F32 output the
process protocol of `quantdiff test-impl` asks for.
"""
import json
import struct

import numpy as np

# safetensors dtype name -> (numpy dtype, item size). BF16 is kept as its
# raw 16-bit words (numpy has no bfloat16).
DTYPES = {
    "F64": ("<f8", 8), "F32": ("<f4", 4), "F16": ("<f2", 2), "BF16": ("<u2", 2),
    "I64": ("<i8", 8), "I32": ("<i4", 4), "I16": ("<i2", 2), "I8": ("i1", 1),
    "U8": ("u1", 1), "BOOL": ("u1", 1), "U16": ("<u2", 2), "U32": ("<u4", 4),
    "U64": ("<u8", 8),
}
FLOATING = ("F64", "F32", "F16", "BF16")


class Refusal(Exception):
    """A file the reader refuses: rule is the rule ID it breaks."""

    def __init__(self, rule, text):
        super().__init__(f"{rule} {text}")
        self.rule = rule


class Tensor:
    """One tensor of a table: dtype name, shape, C-order little-endian bytes,
    and begin, its place in storage order (ties broken by name)."""

    def __init__(self, dtype, shape, data, begin=0):
        self.dtype, self.shape, self.data, self.begin = dtype, list(shape), data, begin

    def numel(self):
        return int(np.prod(self.shape, dtype=object)) if self.shape else 1

    def values(self):
        return np.frombuffer(self.data, dtype=DTYPES[self.dtype][0])


def ToF32(t):
    """A floating tensor's values as binary32: F16 and BF16 exactly, F64
    rounded to nearest even (numpy's cast)."""
    v = t.values()
    if t.dtype == "BF16":
        return (v.astype(np.uint32) << 16).view(np.float32)
    return v.astype(np.float32)


def ReadSafetensors(data):
    """(tensors by name, metadata dict) of a safetensors file's bytes."""
    if len(data) < 8:
        raise Refusal("ST-001", "shorter than the 8-byte header length")
    (n,) = struct.unpack_from("<Q", data, 0)
    if n > len(data) - 8:
        raise Refusal("ST-001", "header longer than the file")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise Refusal("ST-004", f"header is not JSON: {e}")
    if not isinstance(header, dict):
        raise Refusal("ST-004", "header is not an object")
    metadata = header.pop("__metadata__", None) or {}
    tensors = {}
    body = data[8 + n:]
    for name, entry in header.items():
        begin, end = entry["data_offsets"]
        dtype = entry["dtype"]
        tensors[name] = Tensor(dtype, entry["shape"], bytes(body[begin:end]), begin)
    return tensors, metadata


def WriteF32(path, outputs):
    """outputs: list of (name, shape, float32 array) -> an F32 safetensors file."""
    header, offset, blobs = {}, 0, []
    for name, shape, values in outputs:
        blob = np.ascontiguousarray(values, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    text = json.dumps(header, ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
