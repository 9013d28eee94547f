"""Config errors in the project's words, bounded, and one behaviour in train and serve."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from forecaster.exceptions import ConfigError
from prewarm.cli import cli
from training.config import load_config, parse_config


def document(capacity: dict[str, Any] | None = None, **sections: Any) -> dict[str, Any]:
    return {
        "source": {"type": "prometheus", "url": "http://127.0.0.1:9", "step": "5m"},
        "workloads": [
            {
                "name": "chat",
                "demand": "up",
                "capacity": {"capacity_per_replica": 1, **(capacity or {})},
            }
        ],
        **sections,
    }


def error(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    return str(caught.value)


PYDANTIC = ("function-before", "function-after", "ColdStartConfig", "Input should", "literal[")


@pytest.mark.parametrize(
    ("capacity", "line"),
    [
        pytest.param(
            {"cold_start": 0},
            "workloads[0] (chat).capacity.cold_start: must be a duration like '5m' or a number "
            "of seconds > 0, got 0",
            id="cold-start-zero",
        ),
        pytest.param(
            {"cold_start": "soon"},
            "workloads[0] (chat).capacity.cold_start: must be a duration like '5m' or a number "
            "of seconds > 0, got 'soon'",
            id="cold-start-word",
        ),
        pytest.param(
            {"max_replicas": 10**30},
            "workloads[0] (chat).capacity: `max_replicas` must be an integer >= max(1, "
            "min_replicas) and <= 100,000, got 1000000000000000000000000000000 (min_replicas=1)",
            id="max-replicas-huge",
        ),
        pytest.param(
            {"capacity_per_replica": float("inf")},
            "workloads[0] (chat).capacity.capacity_per_replica: must be a finite number, got inf",
            id="infinite",
        ),
        pytest.param(
            {"max_replicas": "many"},
            "workloads[0] (chat).capacity.max_replicas: must be a whole number, got 'many'",
            id="not-a-number",
        ),
    ],
)
def test_errors_name_the_field_and_value_in_the_projects_words(
    capacity: dict[str, Any], line: str
) -> None:
    message = error(document(capacity))
    assert message.splitlines()[1:] == [f"  {line}"]
    assert not any(word in message for word in PYDANTIC), message


def test_an_unknown_field_names_the_one_it_likely_is() -> None:
    data = document({"cold_strat": "3m"}, modle={"name": "lightgbm"})
    data["source"]["urll"] = "http://127.0.0.1:9"
    data["workloads"][0]["min_replicas"] = 0  # a field of `capacity`, a level too high
    data["workloads"][0]["zzz"] = 1  # nothing like it anywhere
    assert sorted(error(data).splitlines()[1:]) == sorted(
        [
            "  source.urll: unknown field (did you mean `url`?), got 'http://127.0.0.1:9'",
            "  workloads[0] (chat).min_replicas: unknown field here (it belongs under "
            "`capacity`), got 0",
            "  workloads[0] (chat).zzz: unknown field (check the spelling), got 1",
            "  workloads[0] (chat).capacity.cold_strat: unknown field (did you mean "
            "`cold_start`?), got '3m'",
            "  modle: unknown field (did you mean `model`?)",
        ]
    )


def test_a_files_key_that_names_no_workload_is_the_likely_typo_of_one() -> None:
    data = document()
    data["source"] = {"type": "file", "files": {"chta": "chat.csv", "other": "b.csv"}}
    data["workloads"].append({**data["workloads"][0], "name": "search"})
    assert error(data).splitlines()[1] == (
        "  (top level): `source.files` has no file for workloads ['chat', 'search']; "
        "its key 'chta' names no workload: did you mean 'chat'?"
    )


def test_echoed_values_and_keys_are_bounded() -> None:
    message = error(document({"cold_start": "x" * 10_000, "y" * 10_000: 1}))
    assert len(message) < 600
    assert "(10002 chars)" in message


def test_staleness_shorter_than_step_plus_refresh_warns_naming_both(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "prewarm.yaml"
    path.write_text(yaml.safe_dump(document(serving={"max_staleness": "1m"})))
    with caplog.at_level(logging.WARNING, logger="training.config"):
        config = load_config(path)
    (warning,) = config.warnings
    assert "serving.max_staleness (60 s)" in warning
    assert "data step (300 s)" in warning and "serving.refresh_interval (15 s)" in warning
    assert "at least 315 s" in warning
    assert warning in caplog.text
    assert parse_config(document(serving={"max_staleness": "6m"})).warnings == []


@pytest.mark.parametrize("command", ["train", "serve"])
def test_staleness_below_refresh_interval_is_one_config_error_in_train_and_serve(
    tmp_path: Path, command: str
) -> None:
    path = tmp_path / "prewarm.yaml"
    path.write_text(
        yaml.safe_dump(document(serving={"max_staleness": "10s", "refresh_interval": "15s"}))
    )
    result = CliRunner().invoke(cli, [command, "--config", str(path)])
    assert result.exit_code == 2, result.output
    assert (
        "serving: `max_staleness` must be at least `refresh_interval`, got max_staleness=10.0"
        in (result.output)
    )


def test_a_lookback_of_more_grid_points_than_the_limit_is_refused() -> None:
    data = document()
    data["source"].update(step="1s", lookback="3650d")
    assert "`lookback` / `step` must stay within 5,000,000 grid points per workload, got " in (
        error(data)
    )


@pytest.mark.parametrize(
    ("model", "named"),
    [
        pytest.param(
            {"params": {"n_estimatorz": 20}},
            "has no parameter `n_estimatorz`; did you mean `n_estimators`?",
            id="unknown-param",
        ),
        pytest.param(
            {"params": {"n_estimators": "many"}},
            "`n_estimators` must be a whole number >= 1, got 'many'",
            id="word-for-a-count",
        ),
        pytest.param(
            {"params": {"n_estimators": -5}},
            "`n_estimators` must be a whole number >= 1, got -5",
            id="negative-count",
        ),
        pytest.param(
            {"params": {"learning_rate": 0}},
            "`learning_rate` must be a finite number > 0, got 0",
            id="zero-rate",
        ),
        pytest.param(
            {"params": {"calibration_window": "soon"}},
            "calibration_window",
            id="calibration-window",
        ),
        pytest.param(
            {"features": {"lags": [0, 100_000_000]}},
            "must be whole cells in [0, 5,000,000], got (0, 100000000)",
            id="lag-past-any-grid",
        ),
    ],
)
def test_model_parameters_are_refused_at_load_naming_them(
    model: dict[str, Any], named: str
) -> None:
    # each of these passed loading and ended training in a traceback after the history
    assert named in error(document(model={"name": "lightgbm-window", **model}))


def test_the_seed_is_a_32_bit_whole_number() -> None:
    assert "evaluation.seed" in error(document(evaluation={"seed": -1}))
    assert "evaluation.seed" in error(document(evaluation={"seed": 2**31}))


@pytest.mark.parametrize("field", ["cold_start", "max_replicas", "capacity_per_replica"])
def test_a_yaml_boolean_is_no_number(field: str) -> None:
    # pydantic read `cold_start: yes` as a 1-second cold start
    message = error(document({field: True}))
    assert f"`{field}` got true, a boolean" in message


def test_a_config_not_in_utf8_names_the_file_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "prewarm.yaml"
    path.write_bytes(yaml.safe_dump(document()).encode() + "# café\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"prewarm.yaml: not UTF-8 text .* is 0xe9"):
        load_config(path)


def test_a_utf16_config_with_its_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "prewarm.yaml"
    path.write_bytes(yaml.safe_dump(document()).encode("utf-16"))
    assert load_config(path).workloads[0].name == "chat"


def test_a_key_given_twice_is_refused_with_both_lines(tmp_path: Path) -> None:
    path = tmp_path / "prewarm.yaml"
    text = yaml.safe_dump(document(), sort_keys=False)
    path.write_text(text.replace("  step: 5m\n", "  step: 5m\n  step: 1m\n"))
    with pytest.raises(ConfigError, match=r"key 'step' given twice \(first on line 4\)"):
        load_config(path)


@pytest.mark.parametrize(
    "overrides",
    [{"capacity": {"cold_start": "30d"}}, {"policy": {"hold": "30d"}}],
    ids=["cold-start", "hold"],
)
def test_a_lead_window_as_long_as_the_training_window_is_refused(
    overrides: dict[str, Any],
) -> None:
    # training then found "only 0 training rows with an observed target" after the history
    data = document(evaluation={"train_window": "14d"})
    workload = data["workloads"][0]
    workload["capacity"] |= overrides.get("capacity", {})
    workload |= {k: v for k, v in overrides.items() if k != "capacity"}
    message = error(data)
    assert "workload 'chat': its lead window" in message
    assert "as long as evaluation.train_window (1209600 s)" in message


@pytest.mark.parametrize(
    ("source", "named"),
    [
        # the client sent the URL's user as basic auth and silently dropped the token
        (
            {"url": "http://bob:s3cretPW@prom:9090", "bearer_token_env": "TOKEN"},
            "`url` holds a user and password, and a bearer token or `basic_auth` is set",
        ),
        ({"url": "ftp://bob:s3cretPW@prom:9090"}, "must start with http:// or https://"),
    ],
    ids=["url-user-and-token", "scheme"],
)
def test_a_prometheus_url_is_refused_without_echoing_its_password(
    source: dict[str, Any], named: str
) -> None:
    data = document()
    data["source"] |= source
    message = error(data)
    assert named in message and "***@prom:9090" in message
    assert "s3cretPW" not in message


def test_a_merge_key_still_shares_a_section_and_its_keys_may_be_overridden(
    tmp_path: Path,
) -> None:
    # the duplicate-key check must leave YAML's `<<: *anchor` to YAML
    path = tmp_path / "prewarm.yaml"
    path.write_text(
        "source: {type: prometheus, url: 'http://127.0.0.1:9', step: 5m}\n"
        "workloads:\n"
        "  - {name: a, demand: up, capacity: &cap {capacity_per_replica: 1, max_replicas: 40}}\n"
        "  - {name: b, demand: up, capacity: {<<: *cap, max_replicas: 8}}\n"
    )
    a, b = load_config(path).workloads
    assert (a.capacity.max_replicas, b.capacity.max_replicas) == (40, 8)
    assert b.capacity.capacity_per_replica == 1
