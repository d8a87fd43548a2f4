"""Categorical encoders of ai.onnx.ml: LabelEncoder, CategoryMapper, OneHotEncoder.

- LabelEncoder: y = values[i] where keys[i] == x (the last such i), else the default.
  Opset 1 maps strings to their index in ``classes_strings`` (default ``default_int64``)
  or int64 indices to those strings (default ``default_string``), as the input's type
  says; opset 2 on takes keys_* / values_* lists, opset 4 also 1-D tensors. Float keys
  compare as IEEE numbers (-0 == 0), a NaN key matches every NaN.
- CategoryMapper: strings to int64 (``cats_strings`` -> ``cats_int64s``, default
  ``default_int64``) or int64 to strings (default ``default_string``), as the input's type
  says: opset 1 LabelEncoder's two maps with its own attribute names.
- OneHotEncoder: y[..., k] = 1 where x == cats[k] (numbers truncated to int64 first), a
  new last axis of len(cats); a value in no category gives a row of zeros, or an error
  with ``zeros`` = 0.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ... import dtypes as _dt
from ...errors import ErrorKind
from ..core.base import InferContext, OpKernel, RunContext, scratch
from ..text.tfidf import find_sorted

_F32, _F64, _I64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)
_STRING = np.dtype(object)


# ---- LabelEncoder ----------------------------------------------------------------------

_KEY_TYPES = frozenset({_STRING, _I64, _F32, _F64, np.dtype(np.int32), np.dtype(np.int16)})
# list attribute -> element type of the tensor it makes
_KEYS = {"keys_strings": _STRING, "keys_int64s": _I64, "keys_floats": _F32}
# list attribute -> (element type, its default attribute, that attribute's default)
_VALUES = {"values_strings": (_STRING, "default_string", "_Unused"),
           "values_int64s": (_I64, "default_int64", -1),
           "values_floats": (_F32, "default_float", -0.0)}


def _tensor_default(dtype):
    """The default for values_tensor when default_tensor is not given."""
    return "_Unused" if dtype == _STRING else (-1 if dtype.kind in "iu" else -0.0)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True, fastmath=False)
def _positions(x, keys, pos, nan_pos, miss, out):
    """out[i] = pos[k] where keys[k] == x[i] (keys sorted), nan_pos for a NaN, else miss."""
    for i in range(x.size):
        v = x[i]
        if v != v:
            out[i] = nan_pos
            continue
        k = find_sorted(keys, 0, keys.size, v)
        out[i] = miss if k < 0 else pos[k]


class _Map:
    """One key -> value mapping: positions into ``table`` (values, then the default)."""

    def __init__(self, node, keys: np.ndarray, values: np.ndarray, default):
        if keys.size != values.size:
            node.fail(f"keys and values have different lengths ({keys.size} and {values.size})")
        if keys.dtype not in _KEY_TYPES or values.dtype not in _KEY_TYPES:
            node.fail(f"keys of element type {_dt.name_of(keys.dtype)} and values of "
                      f"{_dt.name_of(values.dtype)} are not among the allowed types")
        self.keys_dtype = keys.dtype
        self.table = np.concatenate([values, np.array([default]).astype(values.dtype)])
        self.miss = values.size
        if keys.dtype == _STRING:
            self.lookup = {k: i for i, k in enumerate(keys.tolist())}   # the last key wins
            return
        nan = np.isnan(keys) if keys.dtype.kind == "f" else np.zeros(keys.size, bool)
        self.nan_pos = int(np.flatnonzero(nan)[-1]) if nan.any() else self.miss
        where = np.flatnonzero(~nan)[::-1]                              # the last key wins
        self.sorted, first = np.unique(keys[where], return_index=True)
        self.pos = where[first].astype(np.int64)

    def positions(self, ctx: RunContext, x: np.ndarray) -> np.ndarray:
        idx = scratch(ctx, np.int64, (x.size,))
        if self.keys_dtype == _STRING:
            get, miss = self.lookup.get, self.miss
            idx[:] = np.fromiter((get(s, miss) for s in x), np.int64, count=x.size)
        else:
            _positions(x, self.sorted, self.pos, self.nan_pos, self.miss, idx)
        return idx


class LabelEncoder(OpKernel):
    """y = the value of x's key, or the default (module docstring)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        maps = self._opset1_maps() if node.opset < 2 else [self._map()]
        self.maps = {m.keys_dtype: m for m in maps}

    def _opset1_maps(self) -> list:
        node = self.node
        classes = np.array(list(node.attr("classes_strings") or []), dtype=object)
        index = np.arange(classes.size, dtype=np.int64)
        return [_Map(node, classes, index, int(node.attr("default_int64", -1))),
                _Map(node, index, classes, node.attr("default_string", "_Unused"))]

    def _map(self) -> _Map:
        node = self.node
        keys = self._one_of("keys", {**_KEYS, "keys_tensor": None})
        values = self._one_of("values", {**{k: v[0] for k, v in _VALUES.items()},
                                         "values_tensor": None})
        given = next(k for k in [*_VALUES, "values_tensor"] if node.attr(k) is not None)
        if given != "values_tensor":
            _, name, default = _VALUES[given]
            default = node.attr(name, default)
        elif node.attr("default_tensor") is not None:
            d = np.asarray(node.attr("default_tensor"))
            if d.size != 1 or d.dtype != values.dtype:
                node.fail(f"default_tensor must hold one {_dt.name_of(values.dtype)} value")
            default = d.reshape(-1)[0]
        else:
            default = _tensor_default(values.dtype)
        return _Map(node, keys, values, default)

    def _one_of(self, what: str, forms: dict) -> np.ndarray:
        given = [k for k in forms if self.node.attr(k) is not None]
        if len(given) != 1:
            self.node.fail(f"exactly one {what}_* attribute is required, got {given or 'none'}")
        value = self.node.attr(given[0])
        dtype = forms[given[0]]
        arr = np.asarray(value) if dtype is None else np.array(list(value), dtype=dtype)
        return arr.reshape(-1)

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.dtype(0)
        m = self.maps.get(dt)
        if m is None:
            ctx.fail(f"input of element type {_dt.name_of(dt)} does not match the keys ("
                     + ", ".join(_dt.name_of(k) for k in self.maps) + ")")
        ctx.set_output(0, m.table.dtype, ctx.shape(0))
        ctx.prepared = m

    def run(self, ctx: RunContext) -> None:
        m = ctx.prepared
        np.take(m.table, m.positions(ctx, ctx.flat_in[0]), out=ctx.flat_out[0], mode="clip")


class CategoryMapper(LabelEncoder):
    """Opset 1 LabelEncoder's two maps, named cats_strings / cats_int64s."""

    def _opset1_maps(self) -> list:
        node = self.node
        strings = np.array(list(node.attr("cats_strings") or []), dtype=object)
        ints = np.array(list(node.attr("cats_int64s") or []), dtype=np.int64)
        if strings.size != ints.size:
            node.fail(f"cats_strings has {strings.size} entries, cats_int64s {ints.size}")
        return [_Map(node, strings, ints, int(node.attr("default_int64", -1))),
                _Map(node, ints, strings, node.attr("default_string", "_Unused"))]


_CAT_INPUTS = frozenset({_STRING, _I64, np.dtype(np.int32), _F32, _F64})


class OneHotEncoder(OpKernel):
    """y[..., k] = (x == cats[k]) as float32 (module docstring)."""

    supports_exact = True

    def __init__(self, node):
        super().__init__(node)
        ints, strings = node.attr("cats_int64s"), node.attr("cats_strings")
        if (ints is not None and len(ints)) == (strings is not None and len(strings)):
            node.fail("exactly one of cats_int64s and cats_strings is required")
        keys = np.array(list(ints), np.int64) if ints is not None and len(ints) else \
            np.array(list(strings), dtype=object)
        self.map = _Map(node, keys, np.arange(keys.size, dtype=np.int64), -1)
        self.zeros = int(node.attr("zeros", 1))
        self.width = keys.size

    def infer(self, ctx: InferContext) -> None:
        dt = ctx.check_dtype(0, _CAT_INPUTS)
        if (dt == _STRING) != (self.map.keys_dtype == _STRING):
            ctx.fail(f"input of element type {_dt.name_of(dt)} does not match the categories")
        ctx.set_output(0, _F32, tuple(ctx.shape(0)) + (self.width,))

    def run(self, ctx: RunContext) -> None:
        x = ctx.flat_in[0]
        if x.dtype != _STRING and x.dtype != _I64:
            w = scratch(ctx, _I64, x.shape)
            np.copyto(w, np.trunc(x) if x.dtype.kind == "f" else x, casting="unsafe")
            x = w
        out = ctx.flat_out[0].reshape(x.size, self.width)
        if not _one_hot(self.map.positions(ctx, x), self.map.table, out) and not self.zeros:
            self.node.fail("an input value is in no category (zeros=0)", ErrorKind.INVALID_INPUT)


@njit(cache=True, nogil=True, no_cfunc_wrapper=True)
def _one_hot(idx, table, out):
    """out[i] = the one-hot row of category table[idx[i]] (zeros for -1); False if any
    value was in no category."""
    found = True
    for i in range(idx.size):
        out[i, :] = 0
        k = table[idx[i]]
        if k >= 0:
            out[i, k] = 1
        else:
            found = False
    return found
