"""``python -m benchmarks.source [--ops N] [--length L] [--repeats R]``: what recording each
op's ``source`` (the user's line that made it, issue 33) costs a trace, side by side in one
process: ``trace_placement`` with the stacks read, and with the readers
(``tfadapter.origins.graph_built_at``, ``function_built_at``) replaced by ones that read
nothing, alternating run by run.

The generated graphs of ``benchmarks/graphs.py`` are imported GraphDefs, whose ops have no
Python stack: they would show no cost. Here every op is made by Python code, as a user's are:
a TF1 graph builder of ``--ops`` elementwise ops (graph mode: ``op.traceback`` per op), and
``function_mode.make_function``'s tf.function (about 2,000 ops at the default ``--length 50``;
function mode: one ``GraphDebugInfo`` per function). Also timed: the stack readers inside the
traces, and alone on the builder's graph (``graph_built_at``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from .function_mode import make_function, start_tensorflow
from .graphs import quiet_fds
from .measure import fmt_ms, interleaved


def python_builder(tf: Any, n_ops: int) -> Callable[[], Any]:
    """A graph builder making about ``n_ops`` ops, each by a line of Python."""

    def build() -> Any:
        y = tf.ones((64, 64))
        for j in range(n_ops // 2):  # a multiply makes its constant too: two ops per step
            y = y * 0.999 if j % 2 else y + 0.001
        return y

    build.__name__ = f"python_{n_ops}"
    return build


@contextmanager
def reading_timed(spent: dict[str, list[float]]) -> Any:
    """The tracers with their stack readers timed: seconds per call into ``spent``."""
    from tfplace_widget._tracing import function, tracer

    saved = tracer.graph_built_at, function.function_built_at

    def timed(key: str, reader: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            start = time.perf_counter()
            try:
                return reader(*args)
            finally:
                spent.setdefault(key, []).append(time.perf_counter() - start)

        return run

    tracer.graph_built_at = timed("graph", saved[0])
    function.function_built_at = timed("function", saved[1])
    try:
        yield
    finally:
        tracer.graph_built_at, function.function_built_at = saved


@contextmanager
def without_sources() -> Any:
    """The tracers with the stack readers replaced by ones that read nothing."""
    from tfplace_widget._tracing import function, tracer

    saved = tracer.graph_built_at, function.function_built_at
    tracer.graph_built_at = lambda operations: {}
    function.function_built_at = lambda made_by: {}
    try:
        yield
    finally:
        tracer.graph_built_at, function.function_built_at = saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--length", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    tf = start_tensorflow()
    from tfplace_widget import trace_placement
    from tfplace_widget._tfadapter.origins import graph_built_at

    build = python_builder(tf, args.ops)
    f, x = make_function(tf, length=args.length)

    def bare(fn: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            with without_sources():
                return fn()

        return run

    spent: dict[str, list[float]] = {}

    def graph_trace() -> Any:
        with reading_timed(spent):
            return trace_placement(build)

    def function_trace() -> Any:
        with reading_timed(spent):
            return trace_placement(f, x)

    def build_alone() -> Any:  # the user's code, which the graph-mode trace runs first
        with tf.Graph().as_default():
            return build()

    with quiet_fds():
        sizes = {"graph": len(graph_trace().ops), "function": len(function_trace().ops)}
        assert function_trace().ops["source"].notna().any()
        timings = interleaved(
            {
                "graph, with source": graph_trace,
                "graph, without": bare(lambda: trace_placement(build)),
                "graph, the builder alone": build_alone,
                "function, with source": function_trace,
                "function, without": bare(lambda: trace_placement(f, x)),
            },
            args.repeats,
        )
        graph = tf.Graph()
        with graph.as_default():
            build()
        reads = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            graph_built_at(graph.get_operations())
            reads.append(time.perf_counter() - start)
    print(f"trace_placement, median of {args.repeats} (alternating), one process:")
    for mode in ("graph", "function"):
        with_source = statistics.median(timings[f"{mode}, with source"].seconds)
        without = statistics.median(timings[f"{mode}, without"].seconds)
        print(
            f"  {mode} mode, {sizes[mode]:,} ops: {fmt_ms(with_source)} with source, "
            f"{fmt_ms(without)} without: {100 * (with_source - without) / without:+.1f}%"
        )
    # The graph-mode trace runs the user's builder (Python making 10k ops) first: the trace's
    # own work is what is left.
    build = statistics.median(timings["graph, the builder alone"].seconds)
    own = [
        statistics.median(timings[f"graph, {k}"].seconds) - build
        for k in ("with source", "without")
    ]
    print(
        f"  graph mode without the builder's {fmt_ms(build)}: {fmt_ms(own[0])} with source, "
        f"{fmt_ms(own[1])} without: {100 * (own[0] - own[1]) / own[1]:+.1f}%"
    )
    for mode in ("graph", "function"):
        reading = statistics.median(spent[mode])
        print(f"  {mode} mode: reading the stacks inside the trace: {fmt_ms(reading)} (median)")
    ops = len(graph.get_operations())
    read = statistics.median(reads)
    print(f"  reading {ops:,} ops' stacks (graph_built_at): {fmt_ms(read)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
