"""The ``mem`` command group; each ``cli/<topic>.py`` module adds its commands to it."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="poimen-memory")
def mem() -> None:
    """poimen-memory: a searchable memory of your team's markdown vault."""
