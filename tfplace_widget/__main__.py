"""``python -m tfplace_widget``: the ``tfplace`` command line (see :mod:`tfplace_widget.cli`)."""

from tfplace_widget.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
