"""The data fingerprint hashes the names a chunk at a time, and sorted rows without sorting
them again: the same digest as joining them whole after a sort, which held the names' text and
bytes and a sorted copy of the whole history at once."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from training import pipeline
from training.pipeline import data_fingerprint


def _joined_whole(frame: pd.DataFrame) -> str:
    """The fingerprint as it was computed before, the names joined whole."""
    ordered = frame.sort_values(["series", "timestamp"], ignore_index=True)
    digest = hashlib.sha256()
    digest.update("\0".join(ordered["series"].astype(str)).encode())
    digest.update(ordered["timestamp"].astype("int64").to_numpy().tobytes())
    for column in ordered.columns.drop(["series", "timestamp"]):
        digest.update(column.encode())
        values = np.round(ordered[column].to_numpy(dtype=float), 9)
        digest.update(np.nan_to_num(values, nan=-1.2345e300).tobytes())
    return digest.hexdigest()[:16]


@pytest.mark.parametrize("presorted", [False, True], ids=["shuffled", "as-validated"])
@pytest.mark.parametrize("rows", [0, 1, 6, 7, 8, 50])
def test_the_fingerprint_is_the_one_of_the_names_joined_whole(monkeypatch, rows, presorted):
    monkeypatch.setattr(pipeline, "NAMES_CHUNK", 7)  # chunk edges at 7, 14, ...
    rng = np.random.default_rng(rows)
    frame = pd.DataFrame(
        {
            "series": rng.choice(["web", "api", "é-batch"], rows),
            "timestamp": pd.to_datetime(rng.integers(0, 10**9, rows), unit="s", utc=True),
            "value": np.where(rng.random(rows) < 0.2, np.nan, rng.random(rows)),
            "gpu": rng.random(rows),
        }
    )
    if presorted:  # as validate_frame leaves it: hashed without a sorted copy
        frame = frame.sort_values(["series", "timestamp"], ignore_index=True)
    assert data_fingerprint(frame) == _joined_whole(frame)
