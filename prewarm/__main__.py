"""``python -m prewarm``: the same as the ``prewarm`` console script."""

from prewarm.cli import main

main()
