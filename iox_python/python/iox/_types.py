"""Payload identity: numpy dtypes and shapes to the type names iox records.

A fixed-shape service records the Rust type of the whole array
(``np.uint8, shape=(480, 640, 3)`` is ``[[[u8; 3]; 640]; 480]``), a slice service
its element (``bytes`` is ``[u8]``), so Rust programs using those types share the
service. Structured dtypes need a stable name: ``iox.Type("Pose", dtype)``, which
meets a Rust ``#[iox(type_name = "Pose")]`` type of the same size and alignment.

The dtype's field layout is recorded too, as the service's schema (see
``iox_python/src/schema.rs``): numbers, ``bool``, sub-arrays and (nested) structured
dtypes with their field names and offsets. A dtype with other parts (objects,
strings, complex, a non-native byte order) records none.
"""

from __future__ import annotations

import numpy as np

# The dtype metadata key naming a structured dtype's type (set by ``Type``, read
# for nested structs when the schema is recorded).
TYPE_NAME_KEY = "iox.type_name"

_RUST_NAMES = {
    "b1": "bool", "i1": "i8", "u1": "u8", "i2": "i16", "u2": "u16", "i4": "i32",
    "u4": "u32", "i8": "i64", "u8": "u64", "f2": "f16", "f4": "f32", "f8": "f64",
}


class Type:
    """A payload type with a stable name: ``Type("Pose", np.dtype([...], align=True))``.

    Size and alignment are the dtype's (``alignment`` overrides the latter); they must
    equal the Rust type's, or opening is ``IncompatibleService`` naming both sides. The
    fields are recorded as the service's schema (a struct named ``name``) and compared
    with a Rust type's of the same name: another field name, offset or kind is
    ``IncompatibleService`` naming the first such field. A ``#[repr(C)]`` struct's
    dtype is ``np.dtype([...], align=True)`` with the fields in declaration order (or
    open the Rust program's service with ``publish_subscribe()``: no dtype needed).
    A nested struct field is recorded under the name of the ``Type`` whose ``.dtype``
    it is (``("pose", Pose.dtype)``), else under its field name; nested names are
    not compared on open.
    """

    def __init__(self, name: str, dtype, alignment: int | None = None):
        self.name = str(name)
        dtype = np.dtype(dtype)
        _check_carried(dtype)
        if dtype.names is not None:
            # The name travels with the dtype (numpy keeps metadata in nested fields),
            # so a struct that uses ``Pose.dtype`` for a field records it as ``Pose``.
            dtype = np.dtype(dtype, metadata={**(dtype.metadata or {}), TYPE_NAME_KEY: self.name})
        self.dtype = dtype
        self.alignment = int(alignment if alignment is not None else self.dtype.alignment)

    def __repr__(self) -> str:
        return f"iox.Type({self.name!r}, {self.dtype!r})"


def _check_carried(dt: np.dtype) -> None:
    """Refuses a dtype shared memory cannot carry: Python objects (references into one
    process) or no size."""
    if dt.hasobject:
        raise TypeError(f"dtype {dt} holds Python objects, which are references into one process: "
                        "a service carries bytes (numbers, bools, fixed-size strings and structs of them)")
    if dt.itemsize == 0:
        raise TypeError(f"dtype {dt} has no size: give a sized one (e.g. 'S16' for 16-byte strings)")


def element(spec) -> tuple[str, np.dtype, int]:
    """(Rust name, dtype, alignment) of one element."""
    if isinstance(spec, Type):
        return spec.name, spec.dtype, spec.alignment
    if spec is bytes:
        return "u8", np.dtype(np.uint8), 1
    dt = np.dtype(spec)
    _check_carried(dt)
    if dt.fields is not None:
        raise TypeError(f"structured dtype {dt}: give it a stable name with iox.Type('Name', dtype)")
    if dt.byteorder == (">" if np.little_endian else "<"):
        raise TypeError(f"dtype {dt} is not in native byte order")
    name = _RUST_NAMES.get(dt.kind + str(dt.itemsize))
    if name is None:
        raise TypeError(f"dtype {dt} has no Rust counterpart; use iox.Type('Name', dtype)")
    return name, dt, dt.alignment


def array_name(name: str, shape) -> str:
    """Rust's name of an array of ``shape`` (innermost dimension last)."""
    for n in reversed(tuple(shape)):
        name = f"[{name}; {int(n)}]"
    return name
