"""What the kernel columns cost (issue 12): ``kernel_facts`` for every node of a traced graph.

``python -m benchmarks.kernels [--ops 10000] [--repeats 7]`` builds the benchmark graph
(``benchmarks/graphs.py``: chains of AddV2 over 4 CPUs), traces it once, and times, in this one
process, side by side:

- the baseline: ``PlacementTrace.from_run_metadata(run_metadata, graph)``, the conversion that
  now includes the kernel columns;
- ``kernel_facts`` over every node def with the cache cold (the first trace of a process; the
  cache is cleared before each repeat) and warm (every later trace).

Target: the warm cost under 10% of the conversion time. The graph has few distinct (op, dtype)
keys, like most real models; the cold run shows what a first sight of each key costs.
"""

from __future__ import annotations

import argparse
import statistics
import time

from benchmarks import graphs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    from tfplace_widget import PlacementTrace
    from tfplace_widget._tfadapter import kernels, registry

    graph_def = graphs.make_graph_def(args.ops, devices=4)
    run = graphs.bare_traced_run(graph_def, graphs.session_config(4))
    nodes = list(graph_def.node)

    def convert() -> None:
        PlacementTrace.from_run_metadata(run.run_metadata, graph=run.graph)

    def all_facts(cold: bool) -> None:
        if cold:
            kernels._cache.clear()
            registry.registered_kernels.cache_clear()
            registry.registered_op_def.cache_clear()
        for node in nodes:
            kernels.kernel_facts(node)

    convert()  # warm-up: imports, TensorFlow's registries
    timings: dict[str, list[float]] = {"conversion": [], "cold": [], "warm": []}
    for _ in range(args.repeats):
        for key, work in (
            ("conversion", convert),
            ("cold", lambda: all_facts(True)),
            ("warm", lambda: all_facts(False)),
        ):
            start = time.perf_counter()
            work()
            timings[key].append(time.perf_counter() - start)
    base = statistics.median(timings["conversion"])
    print(
        f"{len(nodes):,} node defs, {len(kernels._cache)} distinct kernel keys, "
        f"median of {args.repeats}"
    )
    print(f"{'':<42} {'median ms':>10} {'share of conversion':>20}")
    rows = (
        ("from_run_metadata (baseline, includes it)", "conversion"),
        ("kernel_facts, cache cold", "cold"),
        ("kernel_facts, cache warm", "warm"),
    )
    for label, key in rows:
        value = statistics.median(timings[key])
        print(f"{label:<42} {value * 1e3:>10.1f} {value / base:>19.1%}")
    warm = statistics.median(timings["warm"]) / base
    print(
        f"-> warm: {warm:.1%} of the conversion (target < 10%: {'met' if warm < 0.1 else 'missed'})"
    )


if __name__ == "__main__":
    main()
