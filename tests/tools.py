"""Programs some tests run that a fresh machine may lack (Debian packages the Makefile
installs when it may): without one such a test skips, saying how to install it, unless
``PREWARM_REQUIRE_TOOLS=1`` (set by CI) makes the skip a failure."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

REQUIRE_ENV = "PREWARM_REQUIRE_TOOLS"


def missing(message: str) -> NoReturn:
    """Skip the calling test for ``message`` (fail it when ``PREWARM_REQUIRE_TOOLS=1``)."""
    if os.environ.get(REQUIRE_ENV, "") not in ("", "0"):
        pytest.fail(f"{message} ({REQUIRE_ENV} is set, so it may not skip)", pytrace=False)
    pytest.skip(message)
