from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.exceptions import DataValidationError
from training.exceptions import SourceError
from training.sources.file import load_history, read_series

REPO_DATA = Path(__file__).resolve().parents[2] / "data"
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
VALUE_COLUMNS = {"azure_vm_cpu_5min_relative.csv": "cpu_usage"}
EXPECTED_STEPS = {
    "nyc_taxi_passengers_30min.csv": 1800,
    "twitter_volume_amzn_5min.csv": 300,
    "asg_cpu_utilization_5min.csv": 300,
    "azure_vm_cpu_5min_relative.csv": 300,
    "google_cluster_cpu_5min.csv": 300,
    "azure_llm_conv_requests_1s.csv": 1,
    "azure_llm_conv_arrivals.csv": 60,
}


def _check_trace(path: Path) -> None:
    history = load_history(path, value_col=VALUE_COLUMNS.get(path.name))
    frame = history.frame
    assert history.step == EXPECTED_STEPS[path.name]
    assert list(frame.columns) == ["series", "timestamp", "value"]
    assert frame["series"].unique().tolist() == [path.stem]
    assert frame["timestamp"].diff().dropna().dt.total_seconds().eq(history.step).all()
    assert (frame["value"].dropna() >= 0).all()
    assert frame["value"].notna().mean() > 0.99


@pytest.mark.parametrize("name", sorted(EXPECTED_STEPS))
def test_reads_every_shipped_trace(name):
    _check_trace(REPO_DATA / name)


def test_reads_every_file_of_the_shared_data_folder():
    if not SHARED_DATA.is_dir():
        pytest.skip(f"no shared data folder at {SHARED_DATA}")
    files = sorted(SHARED_DATA.glob("*.csv"))
    assert files
    for path in files:
        _check_trace(path)


def test_arrival_log_is_counted_per_step_as_a_rate():
    arrivals = REPO_DATA / "azure_llm_conv_arrivals.csv"
    per_minute = read_series(arrivals, step=60)
    assert per_minute["value"].sum() * 60 == pytest.approx(19366)
    tokens = read_series(arrivals, step=60, value_col="GeneratedTokens")
    raw = pd.read_csv(arrivals)
    assert tokens["value"].sum() * 60 == pytest.approx(raw["GeneratedTokens"].sum())
    # The per-second file of the same trace agrees with the arrival count.
    per_second = load_history(REPO_DATA / "azure_llm_conv_requests_1s.csv", step=60).frame
    common = per_minute.merge(per_second, on="timestamp", suffixes=("_log", "_1s"))
    inner = common.iloc[1:-1]  # edge minutes are partial in the 1 s file
    np.testing.assert_allclose(inner["value_log"], inner["value_1s"], rtol=1e-9)


def test_unix_seconds_parquet_and_long_files(tmp_path):
    unix = tmp_path / "unix.csv"
    pd.DataFrame({"timestamp": [0, 60, 120], "rps": [1.0, 2.0, 3.0]}).to_csv(unix, index=False)
    frame = read_series(unix)
    assert frame["timestamp"].iloc[1] == pd.Timestamp("1970-01-01 00:01", tz="UTC")
    long = pd.DataFrame(
        {
            "workload": ["a", "a", "b", "b"],
            "time": ["2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"] * 2,
            "value": [1.0, 2.0, 3.0, 4.0],
        }
    )
    parquet = tmp_path / "long.parquet"
    long.to_parquet(parquet)
    frame = read_series(parquet)
    assert frame.groupby("series")["value"].sum().to_dict() == {"a": 3.0, "b": 7.0}


@pytest.mark.parametrize(
    ("content", "name", "kwargs", "error", "match"),
    [
        pytest.param(None, "missing.csv", {}, SourceError, "does not exist", id="missing"),
        pytest.param(
            "a,b\n1,2\n", "data.json", {}, SourceError, "must be .csv or .parquet", id="suffix"
        ),
        pytest.param(
            "timestamp,x,z\n0,1,2\n60,1,2\n",
            "two.csv",
            {},
            SourceError,
            r"candidates \['x', 'z'\]; pick one with --value-col",
            id="ambiguous",
        ),
        pytest.param(
            "timestamp,value\n0,1\n60,2\n",
            "v.csv",
            {"value_col": "rps"},
            SourceError,
            r"`value_col` \(--value-col\) 'rps' is not a column",
            id="unknown-column",
        ),
        pytest.param(
            "timestamp,value\n0,1\n60,-2\n",
            "neg.csv",
            {},
            DataValidationError,
            r"negative demand at line 3: -2.0",
            id="negative",
        ),
    ],
)
def test_file_errors_are_clear(tmp_path, content, name, kwargs, error, match):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(error, match=match):
        read_series(path, **kwargs)


@pytest.mark.parametrize(
    ("content", "error", "match"),
    [
        pytest.param(
            "timestamp,value\n0,1\n60,x\n",
            DataValidationError,
            r"at line 3: 'x'",
            id="line-after-header",
        ),
        pytest.param(
            "timestamp,value\n0,1\n\n,\n60,2\n120,-1\n",
            DataValidationError,
            r"at line 6: -1.0",
            id="empty-lines-count",
        ),
        pytest.param(
            "timestamp,value\nyesterday,1\n2026-01-01T00:00:00Z,2\nnow,3\n",
            DataValidationError,
            r"timestamps .* at lines 2: 'yesterday', 4: 'now'",
            id="several-lines",
        ),
        pytest.param(  # past pandas' range (the property test once met an overflow here)
            "x,timestamp,value\na,0.0,1\nb,1e308,2\nc,1e308,3\n",
            DataValidationError,
            r"at lines 3: 1e\+308, 4: 1e\+308",
            id="seconds-out-of-range",
        ),
        pytest.param(  # the file's lines no longer match its rows: name the row
            'series,timestamp,value\n"a\nb",0,1\n\n"a\nb",60,-1\n',
            DataValidationError,
            r"at row 1: -1.0",
            id="quoted-line-break-keeps-rows",
        ),
        pytest.param(  # pandas would make the first field an index and shift the rest
            "timestamp,value\n0,1,\n60,2,\n",
            SourceError,
            r"1 more field\(s\) than its header's 2 names",
            id="wider-than-header",
        ),
        pytest.param(  # pandas named the line but not what it holds
            "timestamp,value\n0,1\n\n60,2,7\n",
            SourceError,
            r"line 4 has 3 fields where the header has 2: '60,2,7'",
            id="wider-line",
        ),
        pytest.param(  # an empty field is not a NaN anyone wrote
            "timestamp,value\n0,1\n60\n",
            DataValidationError,
            r"column 'value' has no value \(an empty field or NaN\) at line 3",
            id="timestamp-only",
        ),
        pytest.param(  # pandas would take the first line for names: a row lost, no error
            "2019-05-01 00:00:00,0.44\n2019-05-01 00:05:00,0.43\n2019-05-01 00:10:00,0.45\n",
            SourceError,
            r"its first line \('2019-05-01 00:00:00,0.44'\) holds data, not column names",
            id="no-header",
        ),
        pytest.param(
            "1700000000,3\n1700000060,4\n1700000120,5\n",
            SourceError,
            r"its first line \('1700000000,3'\) holds data",
            id="no-header-unix-seconds",
        ),
    ],
)
def test_csv_errors_name_the_line_of_the_file(tmp_path, content, error, match):
    path = tmp_path / "demand.csv"
    path.write_text(content)
    with pytest.raises(error, match=match):
        read_series(path)


def test_a_wide_line_is_shown_bounded_from_a_compressed_file(tmp_path):
    path = tmp_path / "demand.csv.gz"
    lines = ["timestamp,value", *(f"{60 * i},{i}" for i in range(5000)), "0," + "9," * 100_000]
    with gzip.open(path, "wt") as out:
        out.write("\n".join(lines) + "\n")
    with pytest.raises(SourceError, match=r"line 5002 has 100002 fields") as error:
        read_series(path)
    assert "'0,9,9,9," in str(error.value)
    assert len(str(error.value)) < 400


def test_csv_lines_without_fields_are_dropped_not_read_as_data(tmp_path):
    path = tmp_path / "exported.csv"
    path.write_text("timestamp,value\n0,1\n\n60,2\n,\n")
    frame = read_series(path)
    assert frame["value"].tolist() == [1.0, 2.0]


def test_parquet_errors_name_rows(tmp_path):
    path = tmp_path / "demand.parquet"
    pd.DataFrame({"timestamp": [0, 60], "value": [1.0, -1.0]}).to_parquet(path)
    with pytest.raises(DataValidationError, match=r"at row 1: -1.0"):
        read_series(path)
