"""Strict JSON as quantdiff's rules ask for it (ST-004: UTF-8 without BOM,
RFC 8259, depth <= 64, no number overflowing binary64; plus no duplicate
key, as BNB-101 and CFG-001 add), on top of Python's json module."""
import json
import math


class JsonInt(int):
    """A number token of digits only (no sign, fraction or exponent)."""


class NotStrict(Exception):
    pass


def _Pairs(items):
    keys = [k for k, _ in items]
    if len(set(keys)) != len(keys):
        raise NotStrict("duplicate key")
    return dict(items)


def _Float(token):
    v = float(token)
    if math.isinf(v):
        raise NotStrict("number overflows binary64")
    return v


def _Int(token):
    v = int(token)
    if abs(v) > 1.7976931348623157e308:
        raise NotStrict("number overflows binary64")
    return int(token) if token.startswith("-") else JsonInt(v)


def _Constant(name):
    raise NotStrict(f"{name} is not JSON")


def _Check(value, depth):
    if isinstance(value, (dict, list)):
        if depth > 64:
            raise NotStrict("nested deeper than 64")
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for k, v in items:
            if isinstance(k, str):
                k.encode("utf-8")
            _Check(v, depth + 1)
    elif isinstance(value, str):
        value.encode("utf-8")  # a lone surrogate escape raises


def StrictJson(raw):
    """The object a strict JSON text holds, or None."""
    try:
        text = raw.decode("utf-8")
        if text.startswith("\ufeff"):
            return None
        value = json.loads(text, object_pairs_hook=_Pairs, parse_float=_Float, parse_int=_Int,
                           parse_constant=_Constant)
        _Check(value, 1)
    except (UnicodeError, ValueError, NotStrict, RecursionError):
        return None
    return value if isinstance(value, dict) else None
