"""``python -m tfplace_widget``: the ``tfplace`` command line (see :mod:`tfplace_widget._cli`)."""

from tfplace_widget._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
