"""Operators of ai.onnx.ml on maps (packed values, graphrt/packed.py).

- ZipMap: x [N, C] (or [C]) float -> N maps {classlabels[j]: x[n, j]}; a later duplicate
  label wins when the maps are read.
- DictVectorizer: one map -> y [1, len(vocabulary)], y[0, i] = map[vocabulary[i]] or 0
  ("" for string values); the vocabulary's key type must match the map's.
- CastMap: one map int64 -> float or string, keys ascending, -> y [1, K]: DENSE gives the
  values in key order (K = len(map)); SPARSE gives y[0, k] = map[k] for 0 <= k < max_map
  (K = max_map) and a pad elsewhere (0, or "0.f" for strings, as onnxruntime writes it).
  ``cast_to``: TO_FLOAT (float32), TO_INT64 (truncated), TO_STRING (C's "%f" for floats).

The values come out in the order of the operator's definition, so every operator here is
exact.
"""
from __future__ import annotations

import numpy as np

from ... import dtypes as _dt, packed
from ...errors import ErrorKind
from ..core.base import OpKernel, RunContext
from .labels import ClassLabels

_F32, _I64, _STRING = np.dtype(np.float32), np.dtype(np.int64), np.dtype(object)


class _MapKernel(OpKernel):
    supports_exact = True
    outputs_data_dependent = True

    def map_input(self, ctx: RunContext) -> tuple[np.ndarray, np.ndarray]:
        v = ctx.inputs[0]
        if not packed.is_packed(v) or packed.kind_of(v) != packed.MAP:
            self.node.fail("input 0 must be a map", ErrorKind.INVALID_INPUT)
        return packed.unpack_map(v)


class ZipMap(_MapKernel):
    def __init__(self, node):
        super().__init__(node)
        self.classes = ClassLabels(node)

    def run(self, ctx: RunContext) -> None:
        x = ctx.inputs[0]
        if x.dtype != _F32:
            self.node.fail(f"input 0 must be float32, got {_dt.name_of(x.dtype)}",
                           ErrorKind.INVALID_INPUT)
        if x.ndim not in (1, 2) or x.shape[-1] != self.classes.count:
            self.node.fail(f"input 0 must have shape [N, {self.classes.count}], got "
                           f"{list(x.shape)}", ErrorKind.INVALID_INPUT)
        ctx.set_output_value(0, packed.pack_maps(self.classes.values,
                                                 x.reshape(-1, self.classes.count)))


class DictVectorizer(_MapKernel):
    def __init__(self, node):
        super().__init__(node)
        strings, ints = node.attr("string_vocabulary"), node.attr("int64_vocabulary")
        if (strings is not None and len(strings)) == (ints is not None and len(ints)):
            node.fail("exactly one of string_vocabulary and int64_vocabulary is required")
        self.vocabulary = np.array(list(strings), dtype=object) if strings else \
            np.array(list(ints), np.int64)

    def run(self, ctx: RunContext) -> None:
        keys, values = self.map_input(ctx)
        if (keys.dtype == _STRING) != (self.vocabulary.dtype == _STRING):
            self.node.fail(f"the map's keys are {_dt.name_of(keys.dtype)}, the vocabulary's "
                           f"{_dt.name_of(self.vocabulary.dtype)}", ErrorKind.INVALID_INPUT)
        where = dict(zip(keys.tolist(), range(keys.size)))       # a later key wins
        out = np.full((1, self.vocabulary.size), "" if values.dtype == _STRING else 0,
                      dtype=values.dtype)
        for i, k in enumerate(self.vocabulary.tolist()):
            j = where.get(k)
            if j is not None:
                out[0, i] = values[j]
        ctx.set_output_value(0, out)


_CAST = {"TO_FLOAT": _F32, "TO_STRING": _STRING, "TO_INT64": _I64}


class CastMap(_MapKernel):
    def __init__(self, node):
        super().__init__(node)
        self.to = node.choice("cast_to", _CAST, "TO_FLOAT")
        self.sparse = node.choice("map_form", {"DENSE": False, "SPARSE": True}, "DENSE")
        self.max_map = int(node.attr("max_map", 1))
        if self.sparse and self.max_map < 0:
            node.fail(f"max_map must be >= 0, got {self.max_map}")

    def _cast(self, values: np.ndarray) -> np.ndarray:
        if self.to == _STRING:
            if values.dtype == _STRING:
                return values
            return np.array(["%f" % v for v in values.tolist()], dtype=object)
        if values.dtype == _STRING:
            try:
                nums = np.array([float(v) for v in values.tolist()], np.float64)
            except ValueError as e:
                self.node.fail(f"a value does not read as a number: {e}", ErrorKind.INVALID_INPUT)
            return np.trunc(nums).astype(_I64) if self.to == _I64 else nums.astype(_F32)
        return np.trunc(values).astype(_I64) if self.to == _I64 else values.astype(_F32)

    def run(self, ctx: RunContext) -> None:
        keys, values = self.map_input(ctx)
        if keys.dtype != _I64:
            self.node.fail("the map's keys must be int64", ErrorKind.INVALID_INPUT)
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], self._cast(values[order])
        if not self.sparse:
            ctx.set_output_value(0, values.reshape(1, -1))
            return
        if keys.size and keys[0] < 0:
            self.node.fail(f"a key is negative ({int(keys[0])})", ErrorKind.INVALID_INPUT)
        out = np.full((1, self.max_map), "0.f" if self.to == _STRING else 0, self.to)
        keep = keys < self.max_map
        out[0, keys[keep]] = values[keep]
        ctx.set_output_value(0, out)
