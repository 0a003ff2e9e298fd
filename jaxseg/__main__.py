"""``python -m jaxseg``: the command-line interface."""

from jaxseg.cli import run

run()
