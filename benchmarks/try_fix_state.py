"""``python -m benchmarks.try_fix_state [--repeats N] [--layers N] [--width N]``: what keeping
and putting back a TF2 step's state costs ``try_fix`` (issue 33), side by side with the run it
wraps, in one process.

Workload: a Keras MLP of ``--layers`` Dense layers ``--width`` wide (default 10 x 1000: 10M
weights, 30M values with Adam's two slots), ``model.train_on_batch`` on a batch of 32. Timed,
interleaved: one run as ``try_fix`` makes it without the state (``tracer.traced_again``, 5
traced steps after a warm-up: the baseline), and the same run with it (the kept values written
back before it, the variables read after it, as ``_tracing/fixes.py`` does); and, once per
``try_fix``, reading the values to keep (``KeptState``). The numbers go to
``benchmarks/RESULTS.md`` by hand.
"""

from __future__ import annotations

import argparse
from typing import Any

from .graphs import quiet_fds
from .measure import fmt_bytes, interleaved, time_once


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--width", type=int, default=1000)
    options = parser.parse_args(argv)
    with quiet_fds():
        import keras
        import numpy as np

        from tfplace_widget import trace_placement
        from tfplace_widget._tracing import tracer
        from tfplace_widget._tracing.recipe import recipe_of
        from tfplace_widget._tracing.user_state import KeptState

        width = options.width
        model = keras.Sequential(
            [keras.Input((width,))] + [keras.layers.Dense(width) for _ in range(options.layers)]
        )
        model.compile(optimizer="adam", loss="mse")
        x = np.ones((32, width), np.float32)
        model.train_on_batch(x, x)
        trace = trace_placement(model.train_on_batch, x, x)
        handed = recipe_of(trace, "benchmark").handed
        args, run_options = (x, x), {"steps": 5}

        def run() -> Any:
            return tracer.traced_again(model.train_on_batch, args, run_options, [])

        keep_s, state = time_once(lambda: KeptState(handed))

        def run_kept() -> Any:
            state.restore()
            ran = run()
            state.values()
            return ran

        timings = interleaved({"run": run, "run, state kept": run_kept}, options.repeats)
        state.restore()
    values = sum(value.size for value in state._values.values())
    nbytes = sum(value.nbytes for value in state._values.values())
    print(f"{state.variables} variables, {values:,} values ({fmt_bytes(nbytes)} kept on the host)")
    print(f"keep (once per try_fix): {keep_s * 1e3:.0f} ms")
    for name, timing in timings.items():
        print(f"{name}: {timing.ms()}")
    extra = timings["run, state kept"].median - timings["run"].median
    print(f"each run's extra: {extra * 1e3:.0f} ms ({extra / timings['run'].median:.0%})")


if __name__ == "__main__":
    main()
