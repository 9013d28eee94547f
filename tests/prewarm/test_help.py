"""Every flag of every command says what it does, and a bad value names the flag."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from prewarm.cli import cli

CONTEXT = click.Context(cli)
COMMANDS = cli.list_commands(CONTEXT)  # loaded on first use: listed, then got by name


@pytest.mark.parametrize("name", COMMANDS)
def test_every_flag_has_help(name: str) -> None:
    command = cli.get_command(CONTEXT, name)
    assert command is not None
    silent = [
        param.opts[0]
        for param in command.params
        if isinstance(param, click.Option) and not (param.help or "").strip()
    ]
    assert silent == [], f"prewarm {name}: flags without help"


def test_an_slo_out_of_range_names_the_flag() -> None:
    result = CliRunner().invoke(cli, ["backtest", "data.csv", "--slo-unserved", "2"])
    assert result.exit_code == 2
    assert "Invalid value for '--slo-unserved': 2.0 is not in the range 0<x<1" in result.output
