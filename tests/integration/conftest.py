"""Fixtures for tests that talk to real servers (see :mod:`tests.integration.prometheus`)."""

from __future__ import annotations

from tests.integration.prometheus import prometheus_factory

__all__ = ["prometheus_factory"]
