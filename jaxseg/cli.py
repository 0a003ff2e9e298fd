"""The ``jaxseg`` command (``jaxseg evaluate ...``, also ``python -m jaxseg``).

``main(argv)`` returns the exit status (for use in a program); ``run()`` is the console command.
"""

from jaxseg._host.cli import main, run

__all__ = ["main", "run"]
