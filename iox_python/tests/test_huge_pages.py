"""Page sizes from Python (``PubSubBuilder.page_size``, ``PubSubService.page_size``):
a pool on reserved 2 MiB hugetlb pages shared with a child process (every byte of a
1 MiB frame checked), a pool asking for more huge pages than the machine can ever
give (``iox.HugePagesUnavailable``, saying how to reserve them), an unknown page size
(``ValueError``), a page size that differs from the service's on open
(``IncompatibleService``), and a pool on transparent huge pages (best effort, so only
that it works and reads back). The 2 MiB test skips where too few pages are free
(``echo 300 > /proc/sys/vm/nr_hugepages`` as root reserves some)."""

import subprocess

import numpy as np
import pytest

import iox
from conftest import spawn_python

HUGE_2M = "/sys/kernel/mm/hugepages/hugepages-2048kB"
MIB = 1 << 20
PAGE = 2 * MIB


def sysfs(name):
    """A counter of the 2 MiB hugetlb pages, or None where the kernel has none."""
    try:
        with open(f"{HUGE_2M}/{name}") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def small_frames(name, pages):
    """A slice service of bytes, frames of up to 1 MiB, with the smallest limits: a
    pool of a few 1 MiB chunks."""
    return (iox.Service(name).publish_subscribe(bytes, max_len=MIB)
            .max_publishers(1).max_subscribers(2).subscriber_buffer(2).max_loans(1).max_held(1)
            .page_size(pages))


def frame():
    """1 MiB whose every byte depends on its offset (not a repeating 256-byte cycle)."""
    i = np.arange(MIB, dtype=np.uint32)
    return ((i * 2654435761) >> 13).astype(np.uint8)


def test_a_2mib_page_pool_shared_with_a_child_process(root):
    # The pages this pool needs: its chunks (as a 4 KiB twin's pool shows them), in
    # whole 2 MiB pages, and one spare.
    twin = small_frames("huge/twin", "4k").create()
    assert twin.page_size == "4k"
    need = -(-sum(size * count for size, count, _ in iox.pool_usage("huge/twin", root)) // PAGE) + 1
    free, promised = sysfs("free_hugepages"), sysfs("resv_hugepages")
    if free is None:
        pytest.skip("this kernel has no 2 MiB huge pages")
    if free - (promised or 0) < need:
        pytest.skip(f"needs {need} free 2 MiB huge pages, {free - (promised or 0)} are "
                    f"(free {free}, promised {promised}): echo 300 > /proc/sys/vm/nr_hugepages")

    svc = small_frames("huge/frames", "2m").create()
    assert svc.page_size == "2m"
    sub = svc.subscriber()
    child = spawn_python(f"""
        import sys
        import numpy as np
        import iox
        svc = (iox.Service("huge/frames").publish_subscribe(bytes, max_len={MIB})
               .max_publishers(1).max_subscribers(2).subscriber_buffer(2).max_loans(1).max_held(1)
               .page_size("2m").open())
        print(svc.page_size, flush=True)
        i = np.arange({MIB}, dtype=np.uint32)
        pub = svc.publisher()
        pub.send(((i * 2654435761) >> 13).astype(np.uint8))
        print("sent", flush=True)
        sys.stdin.readline()  # the parent has checked the frame
    """, stdin=subprocess.PIPE)
    try:
        assert child.stdout.readline().strip() == "2m"
        assert child.stdout.readline().strip() == "sent"
        sample = sub.receive(timeout=10.0)
        assert sample is not None, "no frame from the child within 10 s"
        got = sample.array
        assert got.dtype == np.uint8 and got.shape == (MIB,)
        assert np.array_equal(got, frame())
        del got, sample
        # Opened without a dtype (the recorded schema's), the page size reads the same.
        assert iox.Service("huge/frames").publish_subscribe().open().page_size == "2m"
    finally:
        out, err = child.communicate("done\n", timeout=30)
    assert child.returncode == 0, err


def test_too_few_huge_pages_raise_hugepagesunavailable_saying_how_to_reserve(root):
    total, overcommit = sysfs("nr_hugepages"), sysfs("nr_overcommit_hugepages")
    if total is None:
        pytest.skip("this kernel has no 2 MiB huge pages")
    # More pages than the machine has or may add: 1 MiB chunks, two to a page.
    pages = total + (overcommit or 0) + 2
    builder = (iox.Service("huge/too-big").publish_subscribe(bytes, size_classes=[(MIB, 2 * pages)])
               .max_publishers(1).max_subscribers(1).subscriber_buffer(1).max_loans(1).max_held(1)
               .allow_pool_exhaustion().page_size("2m"))
    with pytest.raises(iox.HugePagesUnavailable) as raised:
        builder.create()
    assert isinstance(raised.value, iox.Error)
    message = str(raised.value)
    assert "nr_hugepages" in message and "hugepages=" in message, message
    assert "huge/too-big" in message, message
    # Nothing was left behind: the service does not exist.
    with pytest.raises(iox.ServiceNotFound):
        iox.Service("huge/too-big").publish_subscribe(bytes, size_classes=[(MIB, 2 * pages)]).open()


def test_an_unknown_page_size_and_a_different_one_on_open_are_refused(root):
    with pytest.raises(ValueError, match='page size "3m" is unknown: use 4k'):
        iox.Service("huge/unknown").publish_subscribe(bytes, max_len=16).page_size("3m")
    # Longer spellings read as the short ones.
    base = small_frames("huge/base", "4KiB").create()
    assert base.page_size == "4k"
    with pytest.raises(iox.IncompatibleService, match="page size"):
        small_frames("huge/base", "2m").open()
    assert small_frames("huge/base", "4k").open().page_size == "4k"
    # Without a page size, the opener takes the service's.
    opened = iox.Service("huge/base").publish_subscribe(bytes, max_len=MIB).open()
    assert opened.page_size == "4k"


def test_a_transparent_huge_page_pool_works(root):
    svc = small_frames("huge/thp", "thp").create()
    assert svc.page_size == "thp"
    assert iox.Service("huge/thp").publish_subscribe(bytes, max_len=MIB).open().page_size == "thp"
    sub = svc.subscriber()
    pub = svc.publisher()
    data = frame()
    pub.send(data)
    sample = sub.receive(timeout=1.0)
    assert sample is not None
    assert np.array_equal(sample.array, data)
