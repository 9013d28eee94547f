"""The memory a refresh frees goes back to the operating system (glibc's ``malloc_trim``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from serving.engine import heap

ROOT = Path(__file__).resolve().parents[2]

# 100,000 blocks of 2 KiB (each a malloc of its own, past pymalloc's 512 bytes), freed but for
# one allocated after them, which keeps the heap's top in use: malloc cannot shrink the heap
# from its end by itself, and the freed pages stay resident until trimmed.
FREED_BUT_RESIDENT = """
import sys
from serving.engine import heap

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))

blocks = [bytes(2048) for _ in range(100_000)]
pinned = bytes(2048)
del blocks[:]
freed = rss()
returned = heap.trim()
print(freed, rss(), returned)
"""


@pytest.mark.skipif(not heap.AVAILABLE, reason="no malloc_trim in this C library (not glibc)")
def test_freed_pages_are_returned_to_the_operating_system() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(FREED_BUT_RESIDENT)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    freed, trimmed, returned = done.stdout.split()
    assert returned == "True"
    # 200 MiB were freed; at least 150 MiB of it leaves the resident memory
    assert int(freed) - int(trimmed) > 150 * 1024
