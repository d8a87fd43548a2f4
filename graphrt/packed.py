"""Sequences, optionals and maps as one rank-1 uint8 tensor each (docs/contract.md section 8).

Layout, little-endian:
  tag  b"GRPV" (4 bytes), kind (1 byte)
  kind SEQUENCE:        element type code (1 byte), count (uint32), then `count` elements
  kind OPTIONAL_NONE:   element type code (1 byte), nothing else
  kind OPTIONAL_TENSOR: one element
  kind OPTIONAL_SEQ:    a whole packed sequence (with its own tag)
  kind MAP:             the keys as a 1-D element, then the values as a 1-D element
  kind MAPS:            a sequence of maps that share their keys (ZipMap's output): the keys
                        as a 1-D element, then the values as an [N, len(keys)] element
  element:              type code (1 byte), rank (1 byte), extents (int64 x rank), then the
                        row-major bytes; for strings, each as a uint32 byte count and UTF-8

Plans, the memory planner and sessions then see one value kind; the cost is a copy per
sequence operation. A MAPS value read as a sequence gives its maps as packed MAP values.
"""
from __future__ import annotations

import struct

import numpy as np

from . import dtypes

TAG = b"GRPV"
SEQUENCE, OPTIONAL_NONE, OPTIONAL_TENSOR, OPTIONAL_SEQ, MAP, MAPS = 1, 2, 3, 4, 5, 6
_STRING = np.dtype(object)


def is_packed(value) -> bool:
    return (isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 1
            and value.size >= 5 and bytes(value[:4]) == TAG)


def _element(arr: np.ndarray) -> bytes:
    arr = np.asarray(arr)           # (np.ascontiguousarray would make a 0-d array 1-d)
    head = struct.pack("<BB", dtypes.to_code(arr.dtype), arr.ndim)
    head += struct.pack(f"<{arr.ndim}q", *arr.shape)
    if arr.dtype == _STRING:
        words = [str(v).encode("utf-8") for v in arr.reshape(-1)]
        return head + b"".join(struct.pack("<I", len(w)) + w for w in words)
    return head + arr.astype(arr.dtype.newbyteorder("<")).tobytes()


def pack_sequence(items, dtype=None) -> np.ndarray:
    items = [np.asarray(x) for x in items]
    if dtype is None:
        dtype = items[0].dtype if items else np.dtype(np.float32)
    body = TAG + struct.pack("<BBI", SEQUENCE, dtypes.to_code(dtype), len(items))
    body += b"".join(_element(x) for x in items)
    return np.frombuffer(body, dtype=np.uint8).copy()


def pack_optional(value, dtype=None) -> np.ndarray:
    if value is None:
        code = dtypes.to_code(dtype) if dtype is not None else 1
        return np.frombuffer(TAG + struct.pack("<BB", OPTIONAL_NONE, code), np.uint8).copy()
    if isinstance(value, (list, tuple)):
        return np.frombuffer(TAG + struct.pack("<B", OPTIONAL_SEQ)
                             + pack_sequence(value, dtype).tobytes(), np.uint8).copy()
    if is_packed(value):        # already a packed sequence
        return np.frombuffer(TAG + struct.pack("<B", OPTIONAL_SEQ) + value.tobytes(), np.uint8).copy()
    return np.frombuffer(TAG + struct.pack("<B", OPTIONAL_TENSOR) + _element(np.asarray(value)),
                         np.uint8).copy()


def kind_of(packed: np.ndarray) -> int:
    return int(packed[4])


def _read_element(buf: bytes, pos: int):
    code, rank = struct.unpack_from("<BB", buf, pos)
    pos += 2
    shape = struct.unpack_from(f"<{rank}q", buf, pos)
    pos += 8 * rank
    dt = dtypes.to_numpy(code)
    if dt == _STRING:
        words = []
        for _ in range(int(np.prod(shape, dtype=np.int64))):
            (size,) = struct.unpack_from("<I", buf, pos)
            words.append(buf[pos + 4:pos + 4 + size].decode("utf-8"))
            pos += 4 + size
        return np.array(words, dtype=object).reshape(shape), pos
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    arr = np.frombuffer(buf, dtype=dt.newbyteorder("<"), count=n // dt.itemsize, offset=pos)
    return arr.astype(dt).reshape(shape), pos + n


def pack_map(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """One map: keys[i] -> values[i] (1-D arrays of one length)."""
    return np.frombuffer(TAG + struct.pack("<B", MAP) + _element(keys) + _element(values),
                         np.uint8).copy()


def pack_maps(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """N maps sharing ``keys``: map n is keys[j] -> values[n, j]."""
    return np.frombuffer(TAG + struct.pack("<B", MAPS) + _element(keys) + _element(values),
                         np.uint8).copy()


def unpack_map(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(keys, values) of a packed MAP."""
    buf = packed.tobytes()
    if buf[:4] != TAG or buf[4] != MAP:
        raise ValueError("not a packed map")
    keys, pos = _read_element(buf, 5)
    return keys, _read_element(buf, pos)[0]


def _unpack_maps(buf: bytes) -> tuple[np.ndarray, np.ndarray]:
    keys, pos = _read_element(buf, 5)
    return keys, _read_element(buf, pos)[0]


def unpack_sequence(packed: np.ndarray) -> tuple[list[np.ndarray], np.dtype]:
    buf = packed.tobytes()
    if buf[:4] == TAG and buf[4] == MAPS:
        keys, values = _unpack_maps(buf)
        return [pack_map(keys, row) for row in values], np.dtype(np.uint8)
    if buf[:4] != TAG or buf[4] != SEQUENCE:
        raise ValueError("not a packed sequence")
    code, count = struct.unpack_from("<BI", buf, 5)
    pos, items = 10, []
    for _ in range(count):
        arr, pos = _read_element(buf, pos)
        items.append(arr)
    return items, dtypes.to_numpy(code)


def unpack_optional(packed: np.ndarray):
    """None, an array, or a list of arrays."""
    buf = packed.tobytes()
    kind = buf[4]
    if kind == OPTIONAL_NONE:
        return None
    if kind == OPTIONAL_TENSOR:
        return _read_element(buf, 5)[0]
    if kind == OPTIONAL_SEQ:
        return unpack_sequence(np.frombuffer(buf[5:], np.uint8))[0]
    raise ValueError("not a packed optional")


def to_python(value):
    """A plan value as the caller sees it: a list for sequences, None or a value for
    optionals, a dict for a map, a list of dicts for a sequence of maps."""
    if not is_packed(value):
        return value
    kind = kind_of(value)
    if kind == SEQUENCE:
        return unpack_sequence(value)[0]
    if kind == MAP:
        keys, values = unpack_map(value)
        return dict(zip(keys.tolist(), values.tolist()))
    if kind == MAPS:
        keys, values = _unpack_maps(value.tobytes())
        names = keys.tolist()
        return [dict(zip(names, row)) for row in values.tolist()]
    return unpack_optional(value)
