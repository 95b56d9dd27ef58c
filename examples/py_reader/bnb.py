"""bitsandbytes layers, read from docs/bnb.md and spec 000 with numpy only.

Works on a tensor table (name -> st_io.Tensor) and the file's metadata, so
the same code reads a safetensors file (read.py) and the state dict
torch.load returns (examples/torch_load). The checks run in the page's
order, the first error raises st_io.Refusal with its rule ID.

BROKEN names deliberate faults for the broken variant (read.py --broken):
  fp4-code8-negzero  FP4 code 8 decodes to -0.0 (bnb's CUDA and C++ decoders,
                     not the spec's table: docs/bnb.md "FP4 code 8")
  nibble-order       the low nibble of byte j is element 2j (BNB-002 reversed)
"""
import numpy as np

from st_io import FLOATING, Refusal, ToF32
from strict_json import JsonInt, StrictJson

BROKEN = set()

# Spec 000 / peer TABLES.json: the 16 binary32 values of each 4-bit type.
TABLES = {
    "nf4": ["bf800000", "bf3239b1", "bf066b30", "beca32a0", "be91a24d", "be3d353f", "bdba7871", "00000000",
            "3da2faff", "3e24cae3", "3e7c04dd", "3ead033a", "3ee1a4b8", "3f1007ab", "3f3913b3", "3f800000"],
    "fp4": ["00000000", "3baaaaab", "3f2aaaab", "3f800000", "3eaaaaab", "3f000000", "3e2aaaab", "3e800000",
            "00000000", "bbaaaaab", "bf2aaaab", "bf800000", "beaaaaab", "bf000000", "be2aaaab", "be800000"],
}
HF_MARKER = ".quant_state.bitsandbytes__"
BLOCKWISE8_KEY = "bnb_blockwise8_quant_state"
RESTORED_DTYPES = ("float16", "bfloat16", "float32")
ONE_OVER_127 = np.array([0x3C010204], dtype=np.uint32).view(np.float32)[0]


def Table(quant_type):
    words = list(TABLES[quant_type])
    if quant_type == "fp4" and "fp4-code8-negzero" in BROKEN:
        words[8] = "80000000"
    return np.array([int(w, 16) for w in words], dtype=np.uint32).view(np.float32)


def IsInteger(v):
    return isinstance(v, JsonInt) and v < 2**64


def IsNumber(v):
    return isinstance(v, (float, int)) and not isinstance(v, bool)


def PowerOfTwoIn(v, low, high):
    return IsInteger(v) and low <= v <= high and v & (v - 1) == 0


def TypedKeysOk(state, required, checked=None):
    """Required keys present; the checked keys (default: all the page names)
    of their types when present."""
    checks = {"quant_type": lambda v: isinstance(v, str), "blocksize": IsInteger,
              "dtype": lambda v: isinstance(v, str),
              "shape": lambda v: isinstance(v, list) and all(IsInteger(x) for x in v),
              "nested_blocksize": IsInteger, "nested_dtype": lambda v: isinstance(v, str),
              "nested_offset": IsNumber}
    for key, ok in checks.items():
        if checked is not None and key not in checked:
            continue
        if key not in state:
            if key in required:
                return False
            continue
        if not ok(state[key]):
            return False
    return True


# --- layers ------------------------------------------------------------------

class Layer:
    def __init__(self, w, kind):
        self.w, self.kind = w, kind
        self.claims = []  # (state tensor name, form, HF suffix)
        self.sep = "."
        self.scale = self.weight_format = None


def FindLayers(tensors, metadata):
    by_w = {}
    for name in tensors:
        marker = name.find(HF_MARKER)
        if marker >= 0:
            by_w.setdefault(name[:marker], []).append((name, "hf4", name[marker + len(HF_MARKER):]))
        for suffix, form in (("weight_quant_state", "gptq4"), ("SCB", "int8hf"), ("weight_scb", "int8gptq")):
            if name == suffix or name.endswith("." + suffix):
                by_w.setdefault(name[:len(name) - len(suffix)] + "weight", []).append((name, form, ""))
    layers = []
    for w, claims in by_w.items():
        claims.sort(key=lambda c: c[1] not in ("hf4", "gptq4"))  # stable: 4-bit claims first
        layer = Layer(w, "4bit" if claims[0][1] in ("hf4", "gptq4") else "int8")
        layer.claims = claims
        name, form, _ = claims[0]
        if form == "gptq4":
            layer.sep = "_"
        elif form in ("int8hf", "int8gptq"):
            module = w[:len(w) - len("weight")]
            layer.scale = name
            layer.weight_format = module + "weight_format" if form == "int8hf" else None
        layers.append(layer)
    if BLOCKWISE8_KEY in metadata:
        for w in tensors:
            if w not in by_w and w + ".absmax" in tensors and w + ".quant_map" in tensors:
                layers.append(Layer(w, "blockwise8"))
    layers.sort(key=lambda layer: layer.w.encode("utf-8", "surrogatepass"))
    return layers


def Sibling(layer, piece):
    return layer.w + layer.sep + piece


def Members(layer):
    names = {layer.w} | {c[0] for c in layer.claims}
    if layer.kind in ("4bit", "blockwise8"):
        names |= {Sibling(layer, p) for p in ("absmax", "quant_map", "nested_absmax", "nested_quant_map")}
    names |= {n for n in (layer.scale, layer.weight_format) if n}
    return names


def Ceil(a, b):
    return -(-a // b)


def Product(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def IsF32(t, count=None):
    return t is not None and t.dtype == "F32" and (count is None or t.numel() == count)


def FirstNonFinite(tensors, names, rule):
    present = [(tensors[n].begin, n) for n in names if n in tensors]
    for _, name in sorted(present):
        values = tensors[name].values()
        if not np.all(np.isfinite(values)):
            raise Refusal(rule, f"{name}: a value is not finite")


def NestedState(layer, tensors, state):
    """BNB-004's presence checks; True for a nested layer."""
    nested = any(k.startswith("nested_") for k in state) or any(
        Sibling(layer, p) in tensors for p in ("nested_absmax", "nested_quant_map"))
    if not nested:
        return False
    if ("nested_offset" not in state or not PowerOfTwoIn(state.get("nested_blocksize"), 32, 4096)
            or state.get("nested_dtype") != "float32"
            or Sibling(layer, "nested_absmax") not in tensors or Sibling(layer, "nested_quant_map") not in tensors):
        raise Refusal("BNB-004", f"{layer.w}: nested state incomplete")
    return True


def NestedSizes(layer, tensors, state, nblocks):
    if not IsF32(tensors[Sibling(layer, "nested_absmax")], Ceil(nblocks, state["nested_blocksize"])):
        raise Refusal("BNB-004", f"{layer.w}: nested_absmax is not F32 of ceil(nblocks / nested_blocksize)")
    if not IsF32(tensors[Sibling(layer, "nested_quant_map")], 256):
        raise Refusal("BNB-004", f"{layer.w}: nested_quant_map is not F32[256]")


def AbsmaxEff(layer, tensors, state, nested):
    absmax = tensors[Sibling(layer, "absmax")]
    if not nested:
        return absmax.values()
    codes = absmax.values().astype(np.int64)
    nqm = tensors[Sibling(layer, "nested_quant_map")].values()
    nabs = tensors[Sibling(layer, "nested_absmax")].values()
    blocks = np.arange(len(codes)) // state["nested_blocksize"]
    offset = np.float32(state["nested_offset"])
    return (nqm[codes] * nabs[blocks]).astype(np.float32) + offset


def ToDtype(values, dtype):
    """Round binary32 values to the restored dtype (RNE) and widen back."""
    values = values.astype(np.float32)
    if dtype == "float16":
        return values.astype(np.float16).astype(np.float32)
    if dtype == "bfloat16":
        bits = values.view(np.uint32).astype(np.uint64)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16).astype(np.uint32)
        rounded = np.where(np.isnan(values), bits.astype(np.uint32) | 0x00400000, rounded)
        return (rounded & 0xFFFF0000).astype(np.uint32).view(np.float32)
    return values


def FourBit(layer, tensors):
    w = layer.w
    if len(layer.claims) > 1 or w not in tensors or Sibling(layer, "absmax") not in tensors:
        raise Refusal("BNB-105", f"{w}: two states, or the weight or its absmax missing")
    state_name, form, suffix = layer.claims[0]
    st = tensors[state_name]
    state = StrictJson(st.data) if st.dtype == "U8" and len(st.shape) == 1 else None
    if state is None or not TypedKeysOk(state, ("quant_type", "blocksize", "dtype", "shape")):
        raise Refusal("BNB-101", f"{state_name}: not a quant_state")
    if state["quant_type"] not in TABLES:
        raise Refusal("BNB-001", f"{state_name}: quant_type {state['quant_type']!r}")
    if form == "hf4" and suffix != state["quant_type"]:
        raise Refusal("BNB-102", f"{state_name}: suffix {suffix!r} is not the quant_type")
    blocksize = state["blocksize"]
    if not PowerOfTwoIn(blocksize, 32, 4096):
        raise Refusal("BNB-001", f"{state_name}: blocksize {blocksize}")
    if state["dtype"] not in RESTORED_DTYPES:
        raise Refusal("BNB-103", f"{state_name}: dtype {state['dtype']!r}")
    nested = NestedState(layer, tensors, state)
    n = Product(state["shape"])
    if n >= 2**64 or len(tensors[w].data) != Ceil(n, 2):
        raise Refusal("BNB-002", f"{w}: not ceil(n / 2) bytes")
    absmax = tensors[Sibling(layer, "absmax")]
    if absmax.dtype != ("U8" if nested else "F32"):
        raise Refusal("BNB-102", f"{w}: absmax dtype {absmax.dtype}")
    nblocks = Ceil(n, blocksize)
    if absmax.numel() != nblocks:
        raise Refusal("BNB-001", f"{w}: absmax has not ceil(n / blocksize) elements")
    if nested:
        NestedSizes(layer, tensors, state, nblocks)
    quant_map = tensors.get(Sibling(layer, "quant_map"))
    if quant_map is not None and not IsF32(quant_map, 16):
        raise Refusal("BNB-102", f"{w}: quant_map is not F32[16]")
    FirstNonFinite(tensors, [Sibling(layer, p) for p in (("nested_absmax", "nested_quant_map") if nested
                                                         else ("absmax",))], "BNB-104")
    packed = np.frombuffer(tensors[w].data, dtype=np.uint8)
    codes = np.empty(2 * len(packed), dtype=np.uint8)
    high, low = packed >> 4, packed & 0xF
    codes[0::2], codes[1::2] = (low, high) if "nibble-order" in BROKEN else (high, low)
    values = Table(state["quant_type"])[codes[:n]]
    scale = AbsmaxEff(layer, tensors, state, nested)[np.arange(n) // blocksize]
    out = ToDtype(values * scale, state["dtype"])
    shape = state["shape"]
    stored = tensors[w].shape
    if len(shape) == 2 and len(stored) >= 1 and stored[0] == 1:  # bnb's compatibility transpose
        return w, [shape[1], shape[0]], out.reshape(shape).T.copy()
    return w, shape, out


def Blockwise8(layer, tensors, metadata):
    w = layer.w
    state = StrictJson(metadata[BLOCKWISE8_KEY].encode("utf-8", "surrogatepass"))
    shape_ok = state is not None and (state.get("shape") is None or (
        isinstance(state["shape"], list) and all(IsInteger(x) for x in state["shape"])))
    blockwise_keys = ("blocksize", "dtype", "nested_blocksize", "nested_dtype", "nested_offset")
    if not shape_ok or not TypedKeysOk(state, ("blocksize", "dtype"), blockwise_keys):
        raise Refusal("BNB-101", f"{BLOCKWISE8_KEY}: not a blockwise state")
    blocksize = state["blocksize"]
    if not PowerOfTwoIn(blocksize, 32, 4096):
        raise Refusal("BNB-107", f"{w}: blocksize {blocksize}")
    if state["dtype"] not in RESTORED_DTYPES:
        raise Refusal("BNB-103", f"{w}: dtype {state['dtype']!r}")
    nested = NestedState(layer, tensors, state)
    codes_t, quant_map = tensors[w], tensors[w + ".quant_map"]
    if codes_t.dtype != "U8" or not IsF32(quant_map, 256):
        raise Refusal("BNB-107", f"{w}: codes not U8 or quant_map not F32[256]")
    if state.get("shape") is not None and list(state["shape"]) != codes_t.shape:
        raise Refusal("BNB-102", f"{w}: state shape differs from the codes")
    absmax = tensors[w + ".absmax"]
    if absmax.dtype != ("U8" if nested else "F32"):
        raise Refusal("BNB-102", f"{w}: absmax dtype {absmax.dtype}")
    n = codes_t.numel()
    nblocks = Ceil(n, blocksize)
    if absmax.numel() != nblocks:
        raise Refusal("BNB-107", f"{w}: absmax has not ceil(n / blocksize) elements")
    if nested:
        NestedSizes(layer, tensors, state, nblocks)
    pieces = ["nested_absmax", "nested_quant_map"] if nested else ["absmax"]
    FirstNonFinite(tensors, [Sibling(layer, p) for p in pieces + ["quant_map"]], "BNB-104")
    scale = AbsmaxEff(layer, tensors, state, nested)[np.arange(n) // blocksize]
    return w, codes_t.shape, ToDtype(quant_map.values()[codes_t.values()] * scale, state["dtype"])


def Int8(layer, tensors):
    w = layer.w
    if w not in tensors:
        raise Refusal("BNB-105", f"{w} missing")
    weight, scb = tensors[w], tensors[layer.scale]
    if weight.dtype != "I8" or len(weight.shape) != 2:
        raise Refusal("BNB-108", f"{w}: not I8 of rank 2")
    rows, cols = weight.shape
    if not IsF32(scb, rows):
        raise Refusal("BNB-108", f"{layer.scale}: not F32 with one value per row")
    fmt = tensors.get(layer.weight_format) if layer.weight_format else None
    if fmt is not None and not (fmt.dtype == "U8" and fmt.numel() == 1 and fmt.data[0] == 0):
        raise Refusal("BNB-108", f"{layer.weight_format}: not a single U8 0")
    FirstNonFinite(tensors, [layer.scale], "BNB-104")
    values = weight.values().astype(np.float32).reshape(rows, cols)
    out = (values * scb.values().reshape(rows, 1)).astype(np.float32) * ONE_OVER_127
    return w, [rows, cols], out.astype(np.float32)


def DecodeTable(tensors, metadata, values=None):
    """The decoded output [(name, shape, float32 values)] sorted by name, or
    None when the table holds no bitsandbytes layer."""
    layers = FindLayers(tensors, metadata)
    if not layers:
        return None
    outputs, members = [], set()
    for layer in layers:
        members |= Members(layer)
        if layer.kind == "4bit":
            outputs.append(FourBit(layer, tensors))
        elif layer.kind == "blockwise8":
            outputs.append(Blockwise8(layer, tensors, metadata))
        else:
            outputs.append(Int8(layer, tensors))
    for name, t in tensors.items():
        if name not in members and t.dtype in FLOATING:
            outputs.append((name, t.shape, ToF32(t)))
    outputs.sort(key=lambda o: o[0].encode("utf-8", "surrogatepass"))
    return outputs
