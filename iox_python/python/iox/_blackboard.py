"""Blackboards: the latest value of each of a fixed set of keys, shared by processes.

    bb = (iox.Service("robot/state").blackboard(np.uint32)
          .add(0, np.float64, 0.0)                      # key 0: speed
          .add(1, np.float32, [0, 0, 0], shape=3)       # key 1: position, [f32; 3] in Rust
          .open_or_create())
    bb.writer().update(0, 1.5)
    r = bb.reader()
    r.get(0)            # numpy scalar (np.float64(1.5)); structured types give np.void
    r.has_changed(0)    # False: read since the last update

Values are copied out and in; each key's type is recorded by name, size and alignment
as for publish-subscribe, so a Rust program with ``#[iox(type_name = ...)]`` types shares
the blackboard. Opening a blackboard someone else made needs no ``add``: the values of
number and array types come back typed; those of other named types come back as uint8
arrays of their bytes unless an ``add(key, iox.Type(...))`` names their dtype.
"""

from __future__ import annotations

import re

import numpy as np

from . import _iox
from ._attributes import AttributeMethods
from ._types import _RUST_NAMES, Type, array_name, element

_KEY_TYPES = {"u1": "u8", "u2": "u16", "u4": "u32", "u8": "u64", "i1": "i8", "i2": "i16", "i4": "i32", "i8": "i64"}
_NUMBERS = {rust: np.dtype(code) for code, rust in _RUST_NAMES.items()}


def _any_bit_pattern(dt: np.dtype) -> bool:
    """Whether every bit pattern of ``dt``'s bytes is a value (no padding, no bool)."""
    if dt.subdtype is not None:
        return _any_bit_pattern(dt.subdtype[0])
    if dt.fields is None:
        return dt.kind in "iufc"
    fields = sorted((off, f.itemsize) for f, off, *_ in dt.fields.values())
    end = 0
    for off, size in fields:
        if off != end:
            return False
        end = off + size
    return end == dt.itemsize and all(_any_bit_pattern(f) for f, *_ in dt.fields.values())


def _dtype_of(name: str):
    """The dtype of a recorded Rust type name, for numbers and arrays of them."""
    if name in _NUMBERS:
        return _NUMBERS[name]
    m = re.fullmatch(r"\[(.*); (\d+)\]", name)
    if m:
        inner = _dtype_of(m.group(1))
        if inner is not None:
            return np.dtype((inner, (int(m.group(2)),)))
    return None


class BlackboardBuilder(AttributeMethods):
    """What ``Service.blackboard(key_dtype)`` returns: keys with their value types
    (``add``), limits, attributes (``attribute``, ``require_attribute``: see
    ``iox._attributes``), then ``open`` / ``create`` / ``open_or_create``."""

    def __init__(self, service, key_dtype):
        dt = np.dtype(key_dtype)
        key_type = _KEY_TYPES.get(dt.kind + str(dt.itemsize))
        if key_type is None:
            raise TypeError(f"key dtype {dt}: a blackboard key from Python is an integer dtype")
        self._service = service
        self._key_type = key_type
        self._entries = []
        self._dtypes = {}
        self._opts = {"root": service.root}

    def add(self, key: int, value, initial=None, shape=None):
        """Key ``key`` with values of ``value`` (a numpy dtype, scalar type or
        ``iox.Type``; with ``shape``, arrays of it), starting at ``initial`` (zeros if
        None) when creating; checked against the existing key when opening."""
        name, dt, alignment = element(value)
        if shape is not None:
            shape = (int(shape),) if np.isscalar(shape) else tuple(int(n) for n in shape)
            name, dt = array_name(name, shape), np.dtype((dt, shape))
        buf = np.zeros(1, dt)
        if initial is not None:
            buf[0] = initial
        self._entries.append((int(key), name, dt.itemsize, alignment, _any_bit_pattern(dt), buf.tobytes()))
        self._dtypes[int(key)] = dt
        return self

    def _set(self, key, value):
        self._opts[key] = value
        return self

    def max_writers(self, n: int):
        return self._set("max_writers", n)

    def max_readers(self, n: int):
        return self._set("max_readers", n)

    def max_listeners(self, n: int):
        return self._set("max_listeners", n)

    def permissions(self, mode: int):
        return self._set("permissions", mode)

    def open(self) -> "Blackboard":
        return self._open("open")

    def create(self) -> "Blackboard":
        return self._open("create")

    def open_or_create(self) -> "Blackboard":
        return self._open("open_or_create")

    def _open(self, mode):
        inner = _iox.open_blackboard(self._service.name, mode, self._key_type, self._entries, self._opts)
        return Blackboard(inner, self._dtypes)


class Blackboard:
    """An open blackboard: ``reader()``, ``writer()``, ``listener()`` (event id i when
    the i-th key of ``keys()`` changes), ``keys()``."""

    def __init__(self, inner, dtypes):
        self._inner = inner
        self._dtypes = {}
        for key, name, size, _alignment in inner.entries():
            dt = dtypes.get(key)
            if dt is None:
                dt = _dtype_of(name)
            if dt is None or dt.itemsize != size:
                dt = np.dtype((np.uint8, (size,)))  # bytes of a type Python was not told
            self._dtypes[key] = dt

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def attributes(self) -> dict[str, str]:
        """The attributes the blackboard's creator recorded (a new dict)."""
        return self._inner.attributes

    def keys(self) -> list[int]:
        return [int(k) for k in self._inner.keys()]

    def dtype(self, key: int) -> np.dtype:
        """The dtype values of ``key`` come back as."""
        return self._dtypes[key]

    def reader(self) -> "BlackboardReader":
        return BlackboardReader(self._inner.reader(), self._dtypes)

    def writer(self) -> "BlackboardWriter":
        return BlackboardWriter(self._inner.writer(), self._dtypes)

    def listener(self):
        return self._inner.listener()

    def event_id(self, key: int) -> int:
        return self.keys().index(key)


def _dtype(dtypes, key):
    try:
        return dtypes[key]
    except KeyError:
        raise _iox.Error(f"the blackboard has no key {key}; its keys are {sorted(dtypes)}") from None


class BlackboardReader:
    def __init__(self, inner, dtypes):
        self._inner = inner
        self._dtypes = dtypes

    def get(self, key: int):
        """A copy of ``key``'s latest value: a numpy scalar, ``np.void`` for a
        structured type, an array for an array type."""
        dt = _dtype(self._dtypes, key)
        buf = np.empty(dt.itemsize, np.uint8)
        self._inner.get_into(key, buf)
        return np.frombuffer(buf, dt)[0]

    def generation(self, key: int) -> int:
        """The generation of ``key``'s value now (1: the initial one)."""
        _dtype(self._dtypes, key)
        return self._inner.generation(key)[0]

    def has_changed(self, key: int) -> bool:
        """Whether ``key`` was updated since this reader last read it."""
        _dtype(self._dtypes, key)
        return self._inner.generation(key)[1]


class BlackboardWriter:
    def __init__(self, inner, dtypes):
        self._inner = inner
        self._dtypes = dtypes

    def update(self, key: int, value) -> int:
        """Sets ``key``'s value (converted to its dtype); the generation published."""
        dt = _dtype(self._dtypes, key)
        buf = np.zeros(1, dt)
        buf[0] = value
        return self._inner.update_from(key, buf.view(np.uint8).reshape(-1))


__all__ = ["BlackboardBuilder", "Blackboard", "BlackboardReader", "BlackboardWriter", "Type"]
