"""Entry point of the ``mem`` console script."""

from __future__ import annotations

import importlib

from cli.app import mem

# Each module attaches its commands to ``mem`` when imported. Heavy imports stay inside the
# command functions so that ``mem sig`` or ``mem optimize`` start fast.
COMMAND_MODULES: tuple[str, ...] = (
    "cli.stack",
    "cli.ingest",
    "cli.optimize",
    "cli.sig",
    "cli.roles",
    "cli.query",
    "cli.eval",
)


def main() -> None:
    """Run the ``mem`` CLI."""
    for name in COMMAND_MODULES:
        importlib.import_module(name)
    mem()


if __name__ == "__main__":
    main()
