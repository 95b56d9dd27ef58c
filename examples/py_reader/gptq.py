"""GPTQ layers (v1 `gptq`, `gptq_v2`, planar `gptq_p`), read from docs/gptq.md
and spec 001 with numpy only: config discovery beside the file (section 1),
the config steps C1..C11 and layer steps L1..L10 (section 3), unpacking
(section 4), zeros (5) and dequantization (6). The first error raises
st_io.Refusal with its rule ID; warnings are not reported (a warning does
not change the process protocol's verdict).
"""
import os

import numpy as np

from st_io import FLOATING, Refusal, ToF32
from strict_json import StrictJson

# Section 1's table: canonical key, its aliases in precedence order, type.
KEYS = [
    ("method", ("method", "quant_method"), "string"),
    ("format", ("format", "checkpoint_format", "version"), "string"),
    ("bits", ("bits", "w_bit", "wbits"), "integer"),
    ("group_size", ("group_size", "q_group_size"), "integer"),
    ("sym", ("sym", "zero_point"), "boolean"),
    ("desc_act", ("desc_act",), "boolean"),
    ("pack_dtype", ("pack_dtype",), "string"),
    ("is_marlin_format", ("is_marlin_format",), "boolean"),
    ("dynamic", ("dynamic",), "object"),
    ("backend", ("backend",), "string"),
]
PLANES = {2: [2], 3: [2, 1], 4: [4], 5: [4, 1], 6: [4, 2], 7: [4, 2, 1], 8: [8]}
MEMBERS = ("qweight", "qzeros", "scales", "g_idx")


def ConfigSources(path):
    """[(name, bytes, nested)] beside PATH in priority order (section 1)."""
    slash = path.rfind("/")
    folder, stem = path[:slash + 1], path[slash + 1:]
    if stem.endswith(".safetensors"):
        stem = stem[:-len(".safetensors")]
    sources = []
    for name in (folder + stem + ".quantize_config.json", folder + "quantize_config.json",
                 folder + "quant_config.json", folder + "config.json"):
        if os.path.isfile(name):
            with open(name, "rb") as f:
                sources.append((name, f.read(), os.path.basename(name) == "config.json"))
    return sources


def OfType(value, kind):
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    return isinstance(value, int) and not isinstance(value, bool) and -2**63 <= value < 2**63


def Present(config, key):
    return config.get(key) is not None


def ReadSource(name, raw, nested):
    """C1: the config object of one source (None: no source at all)."""
    top = StrictJson(raw)
    if top is None:
        raise Refusal("CFG-001", f"{name}: not strict JSON with an object on top")
    if nested:
        top = top.get("quantization_config")
        if top is None:
            return None
        if not isinstance(top, dict):
            raise Refusal("CFG-001", f"{name}: quantization_config is not an object")
    for _, aliases, kind in KEYS:
        for key in aliases:
            if Present(top, key) and not OfType(top[key], kind):
                raise Refusal("CFG-002", f"{name}: {key} is not a {kind}")
    return top


def Resolved(config):
    """{canonical: (value, key)} with method and format defaulted."""
    out = {}
    for canonical, aliases, _ in KEYS:
        for key in aliases:
            if Present(config, key):
                value = config[key]
                if key == "version":
                    value = value.lower()
                if key == "zero_point":
                    value = not value
                out[canonical] = (value, key)
                break
    backend = out.get("backend")
    if backend and backend[0].lower() == "llm-awq":
        out["method"], out["format"] = ("awq", "backend"), ("llm-awq", "backend")
    out.setdefault("method", ("gptq", "method"))
    out.setdefault("format", ("gptq", "format"))
    return out


def CheckConfig(sources):
    """C1..C11; the winner's (format, bits, group_size)."""
    configs = [(name, c) for name, c in ((n, ReadSource(n, raw, nested)) for n, raw, nested in sources)
               if c is not None]
    if not configs:
        raise Refusal("CFG-003", "no config source")
    name, w = configs[0]
    for key in ("method", "quant_method", "format", "checkpoint_format"):
        if w.get(key) == "marlin":
            raise Refusal("GPTQ-005", f"{name}: {key} is marlin")
    if w.get("is_marlin_format") is True:
        raise Refusal("GPTQ-005", f"{name}: is_marlin_format")
    for canonical, aliases, _ in KEYS[:4]:
        present = [k for k in aliases if Present(w, k)]
        norm = [w[k].lower() if k == "version" else w[k] for k in present]
        for k, v in zip(present[1:], norm[1:]):
            if v != norm[0]:
                raise Refusal("CFG-004", f"{name}: {k} disagrees with {present[0]}")
    r = Resolved(w)
    if r["method"][0] != "gptq":
        raise Refusal("CFG-005", f"{name}: method {r['method'][0]!r}")
    fmt = r["format"][0]
    if fmt not in ("gptq", "gptq_v2", "gptq_p"):
        raise Refusal("CFG-005", f"{name}: format {fmt!r}")
    for canonical in ("bits", "group_size"):
        if canonical not in r:
            raise Refusal("CFG-006", f"{name}: no {canonical}")
    bits, group_size = r["bits"][0], r["group_size"][0]
    if group_size != -1 and group_size < 1:
        raise Refusal("CFG-007", f"{name}: group_size {group_size}")
    if (fmt == "gptq_p" and not 2 <= bits <= 8) or (fmt != "gptq_p" and bits not in (2, 3, 4, 8)):
        raise Refusal("GPTQ-001", f"{name}: {bits} bits in format {fmt}")
    if Present(w, "pack_dtype") and w["pack_dtype"] != "int32":
        raise Refusal("CFG-008", f"{name}: pack_dtype {w['pack_dtype']!r}")
    if Present(w, "dynamic") and w["dynamic"]:
        raise Refusal("CFG-009", f"{name}: dynamic overrides")
    for other_name, other in configs[1:]:
        o = Resolved(other)
        for canonical in ("method", "format", "bits", "group_size"):
            if canonical in o and o[canonical][0] != r[canonical][0]:
                raise Refusal("CFG-010", f"{other_name}: {canonical} differs from {name}")
    return fmt, bits, group_size


def Order(t, name):
    return (t.begin, t.begin + len(t.data), name.encode("utf-8", "surrogatepass"))


def FindLayers(tensors):
    layers = {}
    for name in tensors:
        dot = name.rfind(".")
        prefix, suffix = name[:dot + 1], name[dot + 1:]
        if suffix in MEMBERS:
            layers.setdefault(prefix, True)

    def Anchor(p):
        name = next(p + m for m in MEMBERS if p + m in tensors)
        return Order(tensors[name], name)
    return sorted(layers, key=Anchor)


def Fields(words, count, bits, planar):
    """Fields 0..count-1 of a stream of u32 words (section 4)."""
    words = words.astype(np.uint64)
    i = np.arange(count, dtype=np.int64)
    mask = (1 << bits) - 1
    if not planar:
        s = i * bits
        w, o = s // 32, (s % 32).astype(np.uint64)
        padded = np.concatenate([words, np.zeros(1, dtype=np.uint64)])
        value = (padded[w] >> o) | np.where(o + bits > 32, padded[w + 1] << (np.uint64(32) - o), 0)
        return (value & mask).astype(np.int64)
    out = np.zeros(count, dtype=np.int64)
    offset = 0
    t = i % 32
    for p in PLANES[bits]:
        per_word = 32 // p
        index = (i // 32) * bits + offset + t // per_word
        part = (words[index] >> ((t % per_word) * p).astype(np.uint64)) & ((1 << p) - 1)
        out |= part.astype(np.int64) << offset
        offset += p
    return out


def Layer(p, tensors, fmt, bits, group_size):
    anchor = next(p + m for m in MEMBERS if p + m in tensors)
    for m in MEMBERS:
        if p + m not in tensors:
            raise Refusal("GPTQ-101", f"{anchor}: {p + m} missing")
    if p + "weight" in tensors:
        raise Refusal("GPTQ-102", f"{p}weight beside a GPTQ layer")
    ranks = {"qweight": 2, "qzeros": 2, "scales": 2, "g_idx": 1, "bias": 1}
    for m in MEMBERS + ("bias",):
        t = tensors.get(p + m)
        if t is None:
            continue
        ok = t.dtype in ("F16", "BF16", "F32") if m in ("scales", "bias") else t.dtype == "I32"
        if not ok or len(t.shape) != ranks[m]:
            raise Refusal("GPTQ-104", f"{p + m}: dtype or rank")
    qweight, qzeros, scales, g_idx = (tensors[p + m] for m in MEMBERS)
    n_out = qweight.shape[1]

    def Groups(k):
        return 1 if group_size == -1 else -(-k // group_size)
    kg = g_idx.shape[0]
    kq = qweight.shape[0] * 32 // bits if qweight.shape[0] * 32 % bits == 0 else None
    k = kq if kq is not None and Groups(kq) == scales.shape[0] else kg
    g = Groups(k)
    if k % 32 != 0 or qweight.shape[0] != k // 32 * bits:
        raise Refusal("GPTQ-002", f"{p}qweight: shape")
    if n_out % 32 != 0 or qzeros.shape != [g, n_out // 32 * bits]:
        raise Refusal("GPTQ-003", f"{p}qzeros: shape")
    if scales.shape != [g, n_out]:
        raise Refusal("GPTQ-105", f"{p}scales: shape")
    if p + "bias" in tensors and tensors[p + "bias"].shape != [n_out]:
        raise Refusal("GPTQ-105", f"{p}bias: shape")
    groups = g_idx.values().astype(np.int64)
    if kg != k:
        raise Refusal("GPTQ-004", f"{p}g_idx: shape")
    if np.any((groups < 0) | (groups >= g)):
        raise Refusal("GPTQ-004", f"{p}g_idx: a group out of range")
    s = ToF32(scales).reshape(g, n_out)
    if not np.all(np.isfinite(s)):
        raise Refusal("GPTQ-106", f"{p}scales: not finite")
    planar = fmt == "gptq_p"
    qw = qweight.values().view(np.uint32).reshape(qweight.shape)
    codes = np.stack([Fields(qw[:, n], k, bits, planar) for n in range(n_out)])  # [N, K]
    qz = qzeros.values().view(np.uint32).reshape(qzeros.shape)
    zeros = np.stack([Fields(qz[r], n_out, bits, planar) for r in range(g)])  # [G, N]
    if fmt == "gptq":
        zeros = zeros + 1
    d = (codes - zeros[groups].T).astype(np.float32)
    out = d * s[groups].T
    return p + "weight", [n_out, k], out.astype(np.float32)


def Decode(tensors, sources):
    """[(name, shape, float32 values)], or None when no tensor is a GPTQ member."""
    layers = FindLayers(tensors)
    if not layers:
        return None
    fmt, bits, group_size = CheckConfig(sources)
    outputs, consumed = [], set()
    for p in layers:
        outputs.append(Layer(p, tensors, fmt, bits, group_size))
        consumed |= {p + m for m in MEMBERS}
    for name, t in tensors.items():
        if name not in consumed and t.dtype in FLOATING:
            outputs.append((name, t.shape, ToF32(t)))
    return outputs
