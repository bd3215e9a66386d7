"""``main``: run ``tfplace`` with some arguments, return its exit code (see :mod:`tfplace_widget._cli`).

Parse, run the command, and turn whatever it raises into an exit code and one line on stderr.
"""

from __future__ import annotations

from collections.abc import Sequence

from .args import build_parser
from .errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    TRACEBACK,
    CliError,
    one_line,
    print_error,
    silence_stdout,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``tfplace`` with ``argv`` (default ``sys.argv[1:]``); return the exit code.

    The console script ``tfplace`` and ``python -m tfplace_widget`` call it; tests call it
    in-process. Errors are one line on stderr (the traceback too with ``--debug``).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, usage errors
        return exit_.code if isinstance(exit_.code, int) else EXIT_BAD_INPUT
    debug = bool(getattr(args, "debug", False))
    args.color = getattr(args, "color", "auto")
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print_error("interrupted", debug)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `tfplace show ... | head`: the reader left, nothing to say
        silence_stdout()
        return EXIT_OK
    except (CliError, ImportError, OSError, TypeError, ValueError) as exc:
        print_error(one_line(exc), debug)
        return EXIT_BAD_INPUT
    except Exception as exc:  # TraceError is a RuntimeError: kept apart from real bugs below
        from .._model.errors import TraceError

        if isinstance(exc, TraceError):
            print_error(one_line(exc), debug)
            return EXIT_BAD_INPUT
        print_error(
            f"internal error, please report it with the --debug output: {one_line(exc, True)}"
            + TRACEBACK,
            debug,
        )
        return EXIT_INTERNAL
