"""Payload schemas from Python: the schema a dtype records (checked by Rust in another
process: `examples/src/bin/schema_peer.rs`, a nested derived struct), opening a
Rust-created service without a dtype (fields read by name), and a structured dtype
with the Rust type's name but other fields refused, naming the field."""

import os
import subprocess
import time

import numpy as np
import pytest

import iox

# The Rust `schema_peer`'s types, field for field (`#[repr(C)]`: align=True).
POSE = iox.Type("schema_peer::Pose", np.dtype([("x", "f8"), ("y", "f8")], align=True))
SENSOR_FIELDS = [("id", "u4"), ("ok", "?"), ("pose", POSE.dtype), ("hist", "u2", (3,)),
                 ("corners", POSE.dtype, (2,)), ("grid", "f4", (2, 3))]
SENSOR = iox.Type("schema_peer::Sensor", np.dtype(SENSOR_FIELDS, align=True))


def peer(rust_examples, *args):
    return subprocess.Popen([os.path.join(rust_examples, "schema_peer"), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def open_when_created(builder_fn, child, timeout=30.0):
    """``builder_fn().open()`` once the child process has created the service."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return builder_fn().open()
        except iox.ServiceNotFound:
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the Rust program created no service"
            time.sleep(0.01)


def test_rust_struct_read_by_field_name_without_a_dtype(root, rust_examples):
    rust = peer(rust_examples, "publish", "--count", "3")
    svc = open_when_created(lambda: iox.Service("examples/sensors").publish_subscribe(), rust)
    assert svc.payload_type.startswith("schema_peer::Sensor (size 88, alignment 8")
    assert svc.shape == ()
    assert svc.dtype.names == ("id", "ok", "pose", "hist", "corners", "grid")
    assert svc.dtype == SENSOR.dtype  # the same offsets, nested fields and itemsize
    sub = svc.subscriber()
    for i in range(3):
        s = sub.receive(timeout=10.0)
        assert s is not None, "no sample from the Rust publisher within 10 s"
        a = s.array
        assert int(a["id"]) == i and bool(a["ok"]) == (i % 2 == 0)
        assert (float(a["pose"]["x"]), float(a["pose"]["y"])) == (i, -i / 2)
        assert a["hist"].tolist() == [i, i + 1, i + 2]
        assert a["corners"]["x"].tolist() == [1.0, 3.0] and a["corners"]["y"].tolist() == [2.0, i]
        assert a["grid"].tolist() == (np.arange(6, dtype=np.float32).reshape(2, 3) + i).tolist()
    del s, a, sub  # the publisher exits once no subscriber is connected
    out, err = rust.communicate(timeout=30)
    assert rust.returncode == 0, err


def test_rust_example_readings_without_a_dtype(root, rust_examples):
    rust = subprocess.Popen([os.path.join(rust_examples, "publisher"), "--count", "3"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    svc = open_when_created(lambda: iox.Service("examples/readings").publish_subscribe(None), rust)
    assert svc.dtype.names == ("seq", "value") and svc.dtype.itemsize == 16
    sub = svc.subscriber()
    got = []
    while len(got) < 3:
        s = sub.receive(timeout=10.0)
        assert s is not None, "no reading from the Rust publisher within 10 s"
        got.append((int(s.array["seq"]), float(s.array["value"])))
    out, err = rust.communicate(timeout=30)
    assert rust.returncode == 0, err
    assert got == [(i, i * 0.5) for i in range(3)]


def test_python_struct_schema_equals_the_rust_one(root, rust_examples):
    svc = iox.Service("examples/sensors").publish_subscribe(SENSOR).create()
    pose = {"struct": "schema_peer::Pose", "size": 16, "alignment": 8,
            "fields": [("x", 0, "f64"), ("y", 8, "f64")]}
    assert svc.schema == {
        "struct": "schema_peer::Sensor", "size": 88, "alignment": 8,
        "fields": [("id", 0, "u32"), ("ok", 4, "bool"), ("pose", 8, pose),
                   ("hist", 24, {"array": "u16", "len": 3}),
                   ("corners", 32, {"array": pose, "len": 2}),
                   ("grid", 64, {"array": {"array": "f32", "len": 3}, "len": 2})]}
    pub = svc.publisher()
    rust = peer(rust_examples, "check")
    assert pub.wait_for_subscribers(1, 30.0) >= 1, rust.communicate(timeout=30)
    v = np.zeros((), SENSOR.dtype)
    v["id"], v["ok"], v["pose"]["y"], v["hist"][2], v["grid"][1, 0] = 7, True, 2.5, 9, 4.0
    pub.send(v)
    out, err = rust.communicate(timeout=30)
    assert rust.returncode == 0, err
    assert "schema equal: true" in out, out
    assert ("got Sensor { id: 7, ok: true, pose: Pose { x: 0.0, y: 2.5 }, hist: [0, 0, 9], "
            "corners: [Pose { x: 0.0, y: 0.0 }, Pose { x: 0.0, y: 0.0 }], "
            "grid: [[0.0, 0.0, 0.0], [4.0, 0.0, 0.0]] }") in out, out


def test_a_bool_written_as_any_byte_is_refused_by_the_rust_reader(root, rust_examples):
    """numpy lets any byte into a bool (through a uint8 view). `send` refuses such a
    value; a loan written in place is not checked, and the Rust subscriber of the
    struct checks its `bool` field before it hands a sample out: the bad one is
    refused (naming the type), the next one read."""
    svc = iox.Service("examples/sensors").publish_subscribe(SENSOR).create()
    pub = svc.publisher()
    rust = peer(rust_examples, "check")
    assert pub.wait_for_subscribers(1, 30.0) >= 1, rust.communicate(timeout=30)
    bad = np.zeros((), SENSOR.dtype)
    bad["id"] = 1
    bad.reshape(1).view(np.uint8)[SENSOR.dtype.fields["ok"][1]] = 2
    with pytest.raises(ValueError, match="other than 0 or 1"):
        pub.send(bad)
    with pub.loan() as loan:
        loan.array.reshape(1).view(np.uint8)[:] = bad.reshape(1).view(np.uint8)
        assert loan.send() == 1
    good = np.zeros((), SENSOR.dtype)
    good["id"], good["ok"] = 2, True
    assert pub.send(good) == 1
    out, err = rust.communicate(timeout=30)
    assert rust.returncode == 0, err
    assert "refused: " in out and "schema_peer::Sensor" in out, out
    assert "got Sensor { id: 2, ok: true" in out, out


def test_other_fields_under_the_rust_name_are_refused_naming_the_field(root, rust_examples):
    # A Python creator: the Rust opener is refused.
    renamed = [("okay", "?") if f[0] == "ok" else f for f in SENSOR_FIELDS]
    wrong = iox.Type("schema_peer::Sensor", np.dtype(renamed, align=True))
    svc = iox.Service("examples/sensors").publish_subscribe(wrong).create()
    out, err = peer(rust_examples, "check").communicate(timeout=30)
    assert "the service has field `okay` (bool) at offset 4 where this program has `ok` (bool) at offset 4" in err, err
    del svc
    # A Rust creator: the Python opener is refused (IncompatibleService).
    rust = peer(rust_examples, "publish", "--count", "1")
    try:
        other_pose = np.dtype([("x", "f8"), ("z", "f8")], align=True)
        fields = [("pose", other_pose) if f[0] == "pose" else f for f in SENSOR_FIELDS]
        wrong = iox.Type("schema_peer::Sensor", np.dtype(fields, align=True))
        with pytest.raises(iox.IncompatibleService, match=r"in `pose`, the service has field `y` \(f64\) at offset 8 where this program has `z` \(f64\)"):
            open_when_created(lambda: iox.Service("examples/sensors").publish_subscribe(wrong), rust)
    finally:
        rust.kill()
        rust.wait(timeout=10)


def test_python_to_python_field_mismatch(root):
    a = iox.Type("Pt", np.dtype([("x", "f8"), ("y", "f8")]))
    b = iox.Type("Pt", np.dtype([("x", "f8"), ("y", "i8")]))
    svc = iox.Service("py/pt").publish_subscribe(a).create()
    with pytest.raises(iox.IncompatibleService, match=r"field `y` is f64 in the service but i64 in this program"):
        iox.Service("py/pt").publish_subscribe(b).open()
    # The same fields open; so does no dtype at all.
    assert iox.Service("py/pt").publish_subscribe(iox.Type("Pt", a.dtype)).open().schema == svc.schema
    assert iox.Service("py/pt").publish_subscribe().open().dtype == a.dtype


@pytest.mark.parametrize("payload, kw, schema", [
    (np.float32, {"shape": (4, 3)}, {"array": {"array": "f32", "len": 3}, "len": 4}),
    (np.bool_, {}, "bool"),
    (np.int16, {"shape": 5}, {"array": "i16", "len": 5}),
    (bytes, {"chunk_sizes": [64]}, "u8"),
    (np.float64, {"max_len": 8}, "f64"),
    (np.float16, {"max_len": 8}, "f16"),   # Rust's half::f16, a tensor element type
    (iox.Type("[f32; 3]", np.dtype(("f4", (3,)))), {"max_len": 8}, {"array": "f32", "len": 3}),
])
def test_plain_dtypes_record_schemas_and_open_without_one(root, payload, kw, schema):
    svc = iox.Service("py/plain").publish_subscribe(payload, **kw).create()
    assert svc.schema == schema
    opened = iox.Service("py/plain").publish_subscribe().open()
    assert (opened.dtype, opened.shape) == (svc.dtype, svc.shape)
    assert opened.payload_type == svc.payload_type


def test_slice_of_arrays_without_a_dtype(root):
    svc = (iox.Service("py/vec3").publish_subscribe(iox.Type("[f32; 3]", np.dtype(("f4", (3,)))), max_len=8)
           .create())
    sub = iox.Service("py/vec3").publish_subscribe().open().subscriber()
    pub = svc.publisher()
    with pub.loan(2) as loan:
        loan.array[...] = np.arange(6, dtype=np.float32).reshape(2, 3)
        loan.send()
    assert sub.receive(timeout=1.0).array.tolist() == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize("field", ["S8", "U2", ">f8", "c8"])
def test_inexpressible_dtypes_record_no_schema(root, field):
    t = iox.Type("Odd", np.dtype([("a", field), ("b", "u1")]))
    svc = iox.Service("py/odd").publish_subscribe(t).create()
    assert svc.schema is None
    # The dtype still opens it; without one, the error says to pass it.
    assert iox.Service("py/odd").publish_subscribe(t).open().dtype == t.dtype
    with pytest.raises(iox.Error, match=r"records no payload schema.*open it with the payload's dtype"):
        iox.Service("py/odd").publish_subscribe().open()


def test_too_deep_a_dtype_records_no_schema(root):
    deep = np.dtype(np.uint8)
    for _ in range(40):  # schemas nest at most 32 levels
        deep = np.dtype([("a", deep)])
    assert iox.Service("py/deep").publish_subscribe(iox.Type("Deep", deep)).create().schema is None


def test_without_a_dtype_only_open(root):
    with pytest.raises(iox.ServiceNotFound, match="give publish_subscribe a dtype"):
        iox.Service("py/none").publish_subscribe().open()
    for mode in ("create", "open_or_create"):
        with pytest.raises(TypeError, match="needs the payload's dtype"):
            getattr(iox.Service("py/none").publish_subscribe(), mode)()
    with pytest.raises(TypeError, match="shape"):
        iox.Service("py/none").publish_subscribe(None, shape=(2,))
    ev = iox.Service("py/ev").event().create()
    with pytest.raises(iox.IncompatibleService, match="not a publish-subscribe service"):
        iox.Service("py/ev").publish_subscribe().open()
    del ev
