"""A benchmark's runs are reported as they finish, their results kept in the order asked."""

from __future__ import annotations

import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from benchmarks.progress import finished


def test_each_run_is_reported_when_it_finishes_and_results_keep_their_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    first_may_end = threading.Event()

    def first() -> int:
        first_may_end.wait(timeout=60)
        return 1

    with ThreadPoolExecutor(2) as pool:
        futures: dict[str, Future[int]] = {"slow": pool.submit(first)}
        futures["quick"] = pool.submit(lambda: 2)
        futures["quick"].result()

        def describe(key: str, value: int) -> str:
            first_may_end.set()  # the slow run ends only once the quick one is reported
            return f"{key} = {value}"

        results = finished(futures, describe)
    assert list(results.items()) == [("slow", 1), ("quick", 2)]
    lines = capsys.readouterr().err.splitlines()
    assert [re.sub(r"^\[\d+:\d\d:\d\d\] ", "", line) for line in lines] == [
        "1/2 done: quick = 2",
        "2/2 done: slow = 1",
    ]


def test_a_run_that_failed_raises() -> None:
    def broken() -> int:
        raise ValueError("trace 'x' has no rows")

    with ThreadPoolExecutor(1) as pool:
        futures = {"x": pool.submit(broken)}
        with pytest.raises(ValueError, match="trace 'x' has no rows"):
            finished(futures)
