"""Per-sample user headers from Python (`user_header=`): frames with a `FrameHeader`
in front of their pixels between Python and the Rust `camera` example
(examples/src/bin/camera.rs) and the C++ one (iox_ffi/examples/camera.cpp) both ways,
each in its own process; a Rust-created header service opened without dtypes (the
header's dtype rebuilt from its recorded schema); mismatches named; header dtypes under
the payload rules (stable names, padding); the views' lifetimes and the loan's chunk."""

import os
import subprocess
import time

import numpy as np
import pytest

import iox
from conftest import spawn_python

# `iox_examples::FrameHeader` field for field (`#[repr(C)]`: align=True), 32 bytes.
FRAME_HEADER = iox.Type("FrameHeader", np.dtype(
    [("stamp_ns", "u8"), ("width", "u4"), ("height", "u4"), ("step", "u4"), ("encoding", "u1", (12,))],
    align=True))
CAMERA = "examples/camera"
MAX_PIXELS = 64 * 48


def camera(**kw):
    """The `camera` examples' service with their settings."""
    return (iox.Service(CAMERA).publish_subscribe(bytes, max_len=MAX_PIXELS, user_header=FRAME_HEADER, **kw)
            .subscriber_buffer(8))


def frame_header(i):
    """Frame `i`'s header as the examples make it (`iox_examples::frame_header`)."""
    return (1_000_000 + i, 64, 48 - i, 64, np.frombuffer(b"mono8".ljust(12, b"\0"), np.uint8))


def frame_pixels(i, n):
    """Frame `i`'s `n` pixels (`iox_examples::frame_pixel`)."""
    return ((np.arange(n) + i) % 256).astype(np.uint8)


def check_frame(sample, i):
    h = sample.header
    assert h.shape == () and h.dtype == FRAME_HEADER.dtype
    assert (int(h["stamp_ns"]), int(h["width"]), int(h["height"]), int(h["step"])) == frame_header(i)[:4]
    assert h["encoding"].tobytes() == b"mono8".ljust(12, b"\0")
    assert (sample.array == frame_pixels(i, 64 * (48 - i))).all()


def open_when_created(builder_fn, child, timeout=30.0):
    """``builder_fn().open()`` once the child process has created the service."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return builder_fn().open()
        except iox.ServiceNotFound:
            assert child.poll() is None, child.communicate()
            assert time.monotonic() < deadline, "the child created no service"
            time.sleep(0.01)


def publish_frames(pub, frames):
    """Frames in place through the loan (header field by field) for even `i`, through
    ``pub.send(pixels, header=...)`` for odd `i`."""
    for i in frames:
        h = frame_header(i)
        n = h[1] * h[2]
        if i % 2 == 0:
            with pub.loan(n) as loan:
                loan.header["stamp_ns"] = h[0]
                loan.header["width"], loan.header["height"], loan.header["step"] = h[1], h[2], h[3]
                loan.header["encoding"] = h[4]
                loan.array[...] = frame_pixels(i, n)
                assert loan.send() == 1
        else:
            assert pub.send(frame_pixels(i, n), header=h) == 1


def test_rust_frames_reach_python_with_their_headers(root, rust_examples):
    svc = camera().open_or_create()
    assert svc.user_header == "FrameHeader (size 32, alignment 8)"
    sub = svc.subscriber()
    rust = subprocess.Popen([os.path.join(rust_examples, "camera"), "publish", "--count", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for i in range(4):
            s = sub.receive(timeout=10.0)
            assert s is not None, f"no frame {i} from the Rust publisher within 10 s"
            check_frame(s, i)
            with pytest.raises(ValueError):
                s.header["width"] = 1  # read-only, as the payload
        del s, sub  # the publisher exits once no subscriber is connected
        _, err = rust.communicate(timeout=30)
    finally:
        rust.kill()
    assert rust.returncode == 0, err


def test_a_rust_header_service_opens_without_dtypes(root, rust_examples):
    rust = subprocess.Popen([os.path.join(rust_examples, "camera"), "publish", "--count", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Declaring the payload but not the header is refused, naming both sides and
        # both ways out.
        with pytest.raises(iox.IncompatibleService,
                           match=r"carries a user header FrameHeader \(size 32, alignment 8\), and this program "
                                 r"declared no user header.*user_header=.*publish_subscribe\(\) and no dtype"):
            open_when_created(lambda: iox.Service(CAMERA).publish_subscribe(bytes, max_len=MAX_PIXELS), rust)
        svc = iox.Service(CAMERA).publish_subscribe().open()
        assert svc.header_dtype == FRAME_HEADER.dtype  # names, offsets, sub-array, itemsize
        assert svc.header_shape == ()
        assert svc.header_schema == {
            "struct": "FrameHeader", "size": 32, "alignment": 8,
            "fields": [("stamp_ns", 0, "u64"), ("width", 8, "u32"), ("height", 12, "u32"), ("step", 16, "u32"),
                       ("encoding", 20, {"array": "u8", "len": 12})]}
        assert svc.dtype == np.uint8 and svc.shape is None
        sub = svc.subscriber()
        for i in range(2):
            s = sub.receive(timeout=10.0)
            assert s is not None, f"no frame {i} from the Rust publisher within 10 s"
            check_frame(s, i)
        del s, sub
        _, err = rust.communicate(timeout=30)
    finally:
        rust.kill()
    assert rust.returncode == 0, err


def test_python_frames_reach_rust_with_their_headers(root, rust_examples):
    svc = camera().create()
    pub = svc.publisher()
    rust = subprocess.Popen([os.path.join(rust_examples, "camera"), "subscribe", "--count", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert rust.stdout.readline().strip() == "ready", rust.communicate(timeout=30)
        assert pub.wait_for_subscribers(1, 30.0) >= 1
        publish_frames(pub, range(4))
        out, err = rust.communicate(timeout=30)
    finally:
        rust.kill()
    assert rust.returncode == 0, err
    assert out.splitlines() == [f"camera: frame {i} stamp {1_000_000 + i} 64x{48 - i} mono8 ok" for i in range(4)]


def test_python_frames_reach_cpp_with_their_headers(root, c_examples):
    svc = camera().create()
    pub = svc.publisher()
    cpp = subprocess.Popen([str(c_examples / "cpp_camera"), "subscribe", "--count", "4"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert cpp.stdout.readline().strip() == "ready", cpp.communicate(timeout=30)
        assert pub.wait_for_subscribers(1, 30.0) >= 1
        publish_frames(pub, range(4))
        out, err = cpp.communicate(timeout=30)
    finally:
        cpp.kill()
    assert cpp.returncode == 0, err
    assert out.splitlines() == [f"cpp_camera: frame {i} stamp {1_000_000 + i} 64x{48 - i} mono8 ok"
                                for i in range(4)]


def test_cpp_frames_reach_python_with_their_headers(root, c_examples):
    sub = camera().open_or_create().subscriber()
    cpp = subprocess.Popen([str(c_examples / "cpp_camera"), "publish", "--count", "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for i in range(3):
            s = sub.receive(timeout=10.0)
            assert s is not None, f"no frame {i} from the C++ publisher within 10 s"
            check_frame(s, i)
        del s, sub  # the C++ publisher exits once no subscriber is connected
        _, err = cpp.communicate(timeout=30)
    finally:
        cpp.kill()
    assert cpp.returncode == 0, err


def test_a_cpp_header_service_opens_without_dtypes(root, c_examples):
    """The C++ camera declares its header's fields once (IOX_FIELDS): Python opens the
    service the C++ side created without any dtype and reads the header by field name;
    a Python header whose fields differ is refused naming the field."""
    cpp = subprocess.Popen([str(c_examples / "cpp_camera"), "publish", "--count", "2"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        svc = open_when_created(lambda: iox.Service(CAMERA).publish_subscribe(), cpp)
        assert svc.header_dtype == FRAME_HEADER.dtype
        assert svc.header_schema == {
            "struct": "FrameHeader", "size": 32, "alignment": 8,
            "fields": [("stamp_ns", 0, "u64"), ("width", 8, "u32"), ("height", 12, "u32"), ("step", 16, "u32"),
                       ("encoding", 20, {"array": "u8", "len": 12})]}
        renamed = iox.Type("FrameHeader", np.dtype(
            [("stamp_ns", "u8"), ("cols", "u4"), ("height", "u4"), ("step", "u4"), ("encoding", "u1", (12,))],
            align=True))
        with pytest.raises(iox.IncompatibleService, match=r"`cols`|`width`"):
            iox.Service(CAMERA).publish_subscribe(bytes, max_len=MAX_PIXELS, user_header=renamed).open()
        sub = svc.subscriber()
        for i in range(2):
            s = sub.receive(timeout=10.0)
            assert s is not None, f"no frame {i} from the C++ publisher within 10 s"
            check_frame(s, i)
        del s, sub
        _, err = cpp.communicate(timeout=30)
    finally:
        cpp.kill()
    assert cpp.returncode == 0, err


def test_python_frames_reach_another_python_process(root):
    svc = iox.Service("py/stamped").publish_subscribe(np.float32, shape=(2, 2), user_header=np.uint64).create()
    pub = svc.publisher()
    child = spawn_python("""
        import iox, numpy as np
        svc = iox.Service("py/stamped").publish_subscribe(np.float32, shape=(2, 2), user_header=np.uint64).open()
        sub = svc.subscriber()
        print("ready", flush=True)
        for _ in range(3):
            s = sub.receive(timeout=10.0)
            assert s is not None, "no sample within 10 s"
            print(int(s.header), float(s.array.sum()), flush=True)
    """)
    assert child.stdout.readline().strip() == "ready", child.communicate(timeout=30)
    assert pub.wait_for_subscribers(1, 10.0) >= 1
    for i in range(3):
        with pub.loan() as loan:
            loan.header[...] = 100 + i
            loan.array[...] = i
            loan.send()
    out, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    assert out.splitlines() == [f"{100 + i} {4.0 * i}" for i in range(3)]


def test_header_mismatches_name_both_sides(root):
    svc = camera().create()
    with pytest.raises(iox.IncompatibleService,
                       match=r"user header FrameHeader \(size 32, alignment 8\), not a user header u64 "
                             r"\(size 8, alignment 8\)"):
        iox.Service(CAMERA).publish_subscribe(bytes, max_len=16, user_header=np.uint64).open()
    # The same name with other fields: the field is named.
    renamed = [("stride" if n == "step" else n, FRAME_HEADER.dtype.fields[n][0]) for n in FRAME_HEADER.dtype.names]
    other = iox.Type("FrameHeader", np.dtype(renamed, align=True))
    with pytest.raises(iox.IncompatibleService, match=r"FrameHeader \(the user header\).*step.*stride"):
        iox.Service(CAMERA).publish_subscribe(bytes, max_len=16, user_header=other).open()
    # The same header opens, also with the payload taken from the service.
    assert iox.Service(CAMERA).publish_subscribe(user_header=FRAME_HEADER).open().user_header == svc.user_header
    # A header where the service has none.
    plain = iox.Service("py/plain").publish_subscribe(np.uint32).create()
    with pytest.raises(iox.IncompatibleService, match=r"carries no user header, and this program declared a user header FrameHeader"):
        iox.Service("py/plain").publish_subscribe(np.uint32, user_header=FRAME_HEADER).open()
    assert plain.user_header is None and plain.header_dtype is None and plain.header_schema is None


def test_header_dtypes_follow_the_payload_rules(root):
    # A structured dtype needs a stable name, as a payload does.
    with pytest.raises(TypeError, match=r"iox.Type"):
        iox.Service("py/h").publish_subscribe(np.uint8, user_header=FRAME_HEADER.dtype)
    with pytest.raises(TypeError, match=r"byte order"):
        iox.Service("py/h").publish_subscribe(np.uint8, user_header=np.dtype(">u4"))
    # Padding (after `flag`) is allowed and recorded, as for payloads: the identity says
    # that not every bit pattern is a value, and the padding is no field, so a type
    # declaring it as an explicit field (every byte a value, as a Rust derive with a
    # stable name needs) is another header, named by the field.
    padded = iox.Type("Flagged", np.dtype([("stamp", "u8"), ("flag", "u1")], align=True))
    svc = iox.Service("py/h").publish_subscribe(np.uint8, user_header=padded).create()
    assert svc.user_header == "Flagged (size 16, alignment 8, not valid for every bit pattern)"
    explicit = iox.Type("Flagged", np.dtype([("stamp", "u8"), ("flag", "u1"), ("_pad", "u1", (7,))], align=True))
    with pytest.raises(iox.IncompatibleService,
                       match=r"Flagged \(the user header\) has field `_pad` \(\[u8; 7\]\), which the service's has not"):
        iox.Service("py/h").publish_subscribe(np.uint8, user_header=explicit).open()
    # Without layouts to compare (a complex field records none), the identities differ
    # in the padding alone.
    def odd(*pad):
        return iox.Type("Odd", np.dtype([("z", "c8"), ("flag", "u1"), *pad], align=True))
    keep = iox.Service("py/odd").publish_subscribe(np.uint8, user_header=odd()).create()
    assert keep.header_schema is None
    with pytest.raises(iox.IncompatibleService, match=r"Odd \(size 12, alignment 4, not valid for every bit "
                                                       r"pattern\), not a user header Odd \(size 12, alignment 4\)"):
        iox.Service("py/odd").publish_subscribe(np.uint8, user_header=odd(("_pad", "u1", (3,)))).open()
    # Opening without dtypes needs a recorded layout: the error says what to pass.
    with pytest.raises(iox.Error, match=r"user header Odd .* records no field layout.*user_header=iox.Type"):
        iox.Service("py/odd").publish_subscribe().open()
    pub, sub = svc.publisher(), svc.subscriber()
    assert pub.send(np.uint8(3), header=(7, 1)) == 1
    s = sub.receive(timeout=1.0)
    assert (int(s.header["stamp"]), int(s.header["flag"]), int(s.array)) == (7, 1, 3)
    # A sub-array header: its dimensions are the views' shape, with or without a dtype.
    pair = iox.Type("[u32; 2]", np.dtype(("u4", (2,))))
    svc = iox.Service("py/pair").publish_subscribe(np.float64, user_header=pair).create()
    assert (svc.header_dtype, svc.header_shape) == (np.uint32, (2,))
    opened = iox.Service("py/pair").publish_subscribe().open()
    assert (opened.header_dtype, opened.header_shape) == (np.uint32, (2,))
    pub, sub = svc.publisher(), opened.subscriber()
    pub.send(2.5, header=np.array([640, 480], np.uint32))
    assert sub.receive(timeout=1.0).header.tolist() == [640, 480]
    pub.send(2.5, header=[640, 480])  # Python ints take the header's dtype where they fit
    assert sub.receive(timeout=1.0).header.tolist() == [640, 480]
    with pytest.raises(OverflowError):
        pub.send(2.5, header=[640, -1])
    with pytest.raises(TypeError, match=r"casting"):
        pub.send(2.5, header=np.array([640, 480], np.int64))  # int64 into u32: not a safe cast
    with pytest.raises(ValueError, match=r"shape \[2\], not of shape \[3\]"):
        pub.send(2.5, header=np.array([1, 2, 3], np.uint32))
    # Bytes are taken as they are, so only where every byte string is a value: a header
    # with a bool (2 would be no bool for a Rust reader) or padding refuses them.
    flags = iox.Type("[bool; 2]", np.dtype(("?", (2,))))
    svc = iox.Service("py/flags").publish_subscribe(np.uint8, user_header=flags).create()
    pub = svc.publisher()
    with pytest.raises(TypeError, match=r"not every byte string is a value"):
        pub.send(np.uint8(1), header=b"\x02\x00")
    with pytest.raises(TypeError, match=r"not every byte string is a value"):
        iox.Service("py/h").publish_subscribe(np.uint8, user_header=padded).open().publisher().send(
            np.uint8(1), header=bytes(16))
    assert pub.send(np.uint8(1), header=np.array([True, False])) == 0
    # A record header given as its bytes (every byte a value).
    two = iox.Type("TwoWords", np.dtype([("a", "u4"), ("b", "u4")]))
    svc = iox.Service("py/two").publish_subscribe(np.uint8, user_header=two).create()
    pub, sub = svc.publisher(), svc.subscriber()
    assert pub.send(np.uint8(1), header=np.array([5, 6], "u4").tobytes()) == 1
    got = sub.receive(timeout=1.0).header
    assert (int(got["a"]), int(got["b"])) == (5, 6)
    with pytest.raises(ValueError, match=r"not of shape"):
        pub.send(np.uint8(1), header=bytes(16))


def pool_in_use(name):
    return sum(u for _, _, u in iox.pool_usage(name))


def test_loan_and_sample_headers_in_place(root):
    svc = camera().create()
    pub, sub = svc.publisher(), svc.subscriber()
    # A loan's header starts zeroed, also in a chunk an earlier frame's header used
    # (sent to nobody, its chunk is the next loan's).
    del sub
    for _ in range(4):
        assert pub.send(frame_pixels(1, 8), header=frame_header(1)) == 0
        with pub.loan(8) as loan:
            assert loan.header.tobytes() == bytes(32)
    sub = svc.subscriber()
    # Header views count as views of the loan: send is refused while one lives.
    loan = pub.loan(8)
    head = loan.header
    head["width"] = 640
    loan.array[...] = 1
    with pytest.raises(iox.ViewsAlive):
        loan.send()
    del head
    assert loan.send() == 1
    with pytest.raises(iox.Error, match="already sent"):
        loan.header
    s = sub.receive(timeout=1.0)
    view = s.header
    del s
    assert int(view["width"]) == 640  # the view keeps the sample (and chunk) alive
    in_use = pool_in_use(CAMERA)
    del view
    assert pool_in_use(CAMERA) == in_use - 1
    # A loan dropped unsent returns its chunk, also after its header was written (a
    # leaked one would soon be refused: max_loans, then the pool).
    before = pool_in_use(CAMERA)
    for _ in range(100):
        loan = pub.loan(8)
        loan.header["width"] = 1
        del loan
    assert pool_in_use(CAMERA) == before
    assert sub.receive() is None
    # send() needs the header where there is one, and refuses one where there is none.
    with pytest.raises(TypeError, match=r"carries a user header.*header="):
        pub.send(np.zeros(8, np.uint8))
    plain = iox.Service("py/plain").publish_subscribe(np.uint8).create()
    ppub, psub = plain.publisher(), plain.subscriber()
    with pytest.raises(TypeError, match=r"no user header"):
        ppub.send(np.uint8(1), header=frame_header(0))
    with ppub.loan() as loan:
        assert loan.header is None
        loan.array[...] = 5
        loan.send()
    assert psub.receive(timeout=1.0).header is None
