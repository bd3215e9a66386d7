"""``python -m benchmarks.predict [--ops N ...] [--repeats R]``: what ``predict_placement``
costs next to turning the same run's RunMetadata into a PlacementTrace (the baseline).

One process. For each size, a generated chains graph (``benchmarks/graphs.py``: 4 CPUs, one op
in five with no request) is run once by TensorFlow alone with a full trace; then, with the
kernel cache warm (one conversion done and dropped first), each repeat times, interleaved:

- ``PlacementTrace.from_run_metadata(run_metadata, graph=graph)``: the baseline, the
  conversion the panel does for every graph-mode run (its graph facts, kernel facts included);
- ``predict_devices(trace.facts, devices + GPU:0)``: the placer replayed, the pure core;
- ``predict_placement(trace, gpus=1)``: the core plus the predicted trace's frames and copies,
  as the panel calls it again for each number of GPUs (what does not depend on the devices is
  kept on the trace's graph facts after the first prediction);
- the same as the first prediction of the trace: that cache dropped before each call.

Target (issue 12): ``predict_placement`` under 10% of the conversion at 10k ops.
"""

from __future__ import annotations

import argparse
import gc
from typing import Any

from .graphs import bare_traced_run, make_graph_def, session_config
from .measure import Timing, fmt_ms, interleaved

DEVICES = 4
TARGET = 0.10


def measure(n_ops: int, repeats: int) -> dict[str, Any]:
    from tfplace_widget import PlacementTrace, predict_placement
    from tfplace_widget._analyses.predict import gpu_devices, predict_devices
    from tfplace_widget._analyses.predict.cache import _drop_facts_cache

    graph_def = make_graph_def(n_ops, devices=DEVICES)
    run = bare_traced_run(graph_def, session_config(DEVICES))
    trace = PlacementTrace.from_run_metadata(run.run_metadata, graph=run.graph)  # warm caches
    devices = [*trace.devices, *gpu_devices(1)]
    predict_placement(trace, gpus=1)  # warm the predictor's own caches too
    gc.collect()
    timings = interleaved(
        {
            "convert": lambda: PlacementTrace.from_run_metadata(run.run_metadata, graph=run.graph),
            "core": lambda: predict_devices(trace.facts, devices, soft_placement=True),
            "predict": lambda: predict_placement(trace, gpus=1),
            "first": lambda: (_drop_facts_cache(trace.facts), predict_placement(trace, gpus=1)),
        },
        repeats,
    )
    prediction = predict_placement(trace, gpus=1)
    on_gpu = int(prediction.ops["device"].str.contains("GPU").sum())
    return {
        "ops": len(trace.facts),
        "timings": timings,
        "on_gpu": on_gpu,
        "copies": len(prediction.transfers),
    }


def report(results: list[dict[str, Any]]) -> str:
    lines = [
        "| graph (nodes) | RunMetadata -> PlacementTrace (baseline) | predict_devices (core) "
        "| predict_placement | predict / baseline | first prediction of the trace "
        "| first / baseline |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in results:
        t: dict[str, Timing] = result["timings"]
        ratio = t["predict"].median / t["convert"].median
        verdict = "under" if ratio < TARGET else "OVER"
        first = t["first"].median / t["convert"].median
        lines.append(
            f"| {result['ops']:,} | {t['convert'].ms()} | {t['core'].ms()} | {t['predict'].ms()} "
            f"| {ratio:.1%} ({verdict} the {TARGET:.0%} target) | {t['first'].ms()} | {first:.1%} |"
        )
    lines.append("")
    for result in results:
        lines.append(
            f"{result['ops']:,} nodes: {result['on_gpu']:,} predicted on GPU:0, "
            f"{result['copies']:,} predicted copies."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ops", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args(argv)
    results = [measure(n, options.repeats) for n in options.ops]
    print(report(results))
    ten_k = [r for r in results if r["ops"] >= 10_000]
    if ten_k:
        t = ten_k[0]["timings"]
        print(
            f"\nAt {ten_k[0]['ops']:,} nodes predict_placement takes "
            f"{fmt_ms(t['predict'].median)}, {t['predict'].median / t['convert'].median:.1%} "
            f"of the conversion's {fmt_ms(t['convert'].median)} (the trace's first prediction: "
            f"{fmt_ms(t['first'].median)}, {t['first'].median / t['convert'].median:.1%})."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
