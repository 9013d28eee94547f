"""``prewarm`` console script.

Each subcommand lives in its own module and imports heavy dependencies (LightGBM, MLflow,
uvicorn) only when it runs, so ``prewarm --help`` stays instant.
"""

from __future__ import annotations

import os

import click

from prewarm import __version__

# name -> "module:attribute" of a click command; one line per subcommand.
COMMANDS: dict[str, str] = {
    "backtest": "prewarm.backtest:backtest",
    "certs": "prewarm.certs:certs",
    "demo": "prewarm.demo:demo",
    "evaluate": "prewarm.evaluate:evaluate",
    "manifests": "prewarm.manifests:manifests",
    "serve": "prewarm.serve:serve",
    "shadow-report": "prewarm.shadow:shadow_report",
    "train": "prewarm.train:train",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attribute = target.split(":")
        module = __import__(module_name, fromlist=[attribute])
        command: click.Command = getattr(module, attribute)
        return command


@click.group(cls=_LazyGroup)
@click.version_option(__version__, prog_name="prewarm")
def cli() -> None:
    """Predictive autoscaling for GPU inference."""
    # MLflow draws a progress bar for every artifact it downloads (a model, policies.json):
    # noise between prewarm's own lines. A user who wants it sets the variable.
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


TRACEBACK_VARIABLE = "PREWARM_TRACEBACK"
"""Set to 1, an unexpected failure raises with its traceback instead of one line."""


def main() -> None:
    """The console script: ``cli``, with what no command foresaw ended in one line and
    exit code 1, without credentials, instead of a traceback (see :mod:`prewarm.exit_codes`)."""
    try:
        cli()
    except Exception as exc:  # a bug, or a library failing in a way no command handles
        if os.environ.get(TRACEBACK_VARIABLE) == "1":
            raise
        from prewarm.exit_codes import ExitCode, fail

        if isinstance(exc, OSError) and exc.filename is not None:
            # The machine's refusal, not a bug: a report that cannot be written there.
            fail(
                f"cannot write or read {str(exc.filename)[:200]!r}: {exc.strerror}",
                ExitCode.FAILURE,
            )
        fail(
            f"unexpected {type(exc).__name__}: {str(exc)[:500]} (run again with "
            f"{TRACEBACK_VARIABLE}=1 to see where; please report it)",
            ExitCode.FAILURE,
        )
