"""A 10k-op graph traced on a local cluster next to the same graph on one machine (issue 15).

``python -m benchmarks.cluster [--ops 10000] [--repeats 3]`` generates the chains graph of
``benchmarks/graphs.py`` over four devices, then traces it with ``trace_placement``:

- on one machine: ``device_count={"CPU": 4}``, the chains asking for ``/device:CPU:k``;
- on a local cluster ``local:worker=2,ps=2`` (one CPU per task): the same graph with device
  ``k`` renamed to task ``k`` (worker 0, worker 1, ps 0, ps 1), so the same edges cross devices,
  now between tasks over gRPC.

The two are timed interleaved (median, min-max), whole calls: for the cluster that includes
starting the servers' child process (it imports TensorFlow) and stopping it. The start and
stop of an idle cluster is timed on its own too. Then the panel: ``PlacementPanel`` of each
trace (interleaved), and on the cluster's panel folding a task's lanes into one and opening it
again (each redraws the timeline; the search and the picked op are kept). Prints a Markdown
table.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from typing import Any

from benchmarks.graphs import builder, make_graph_def, quiet_fds
from benchmarks.measure import interleaved

DEVICES = 4
CLUSTER = "local:worker=2,ps=2"
TASKS = ["/job:worker/task:0", "/job:worker/task:1", "/job:ps/task:0", "/job:ps/task:1"]


def on_tasks(graph_def: Any) -> Any:
    """``graph_def`` with ``/device:CPU:k`` requests moved to task ``k`` (its CPU:0)."""
    moved = copy.deepcopy(graph_def)
    for node in moved.node:
        if node.device.startswith("/device:CPU:"):
            k = int(node.device.rsplit(":", 1)[1])
            node.device = f"{TASKS[k]}/device:CPU:0"
    return moved


def idle_cluster_seconds() -> float:
    """Start the local cluster's servers and stop them again, nothing traced."""
    from tfplace_widget._tracing.cluster import parse_cluster
    from tfplace_widget._tracing.local_cluster import run_on_local_cluster

    plan = parse_cluster(CLUSTER, None)
    assert plan is not None
    start = time.perf_counter()
    run_on_local_cluster(plan, None, None)
    return time.perf_counter() - start


def panel_timings(one: Any, cluster: Any, repeats: int) -> tuple[dict[str, Any], Any]:
    """The panels of both traces built (interleaved), and a task folded and opened again on
    the cluster's panel (with a search and a picked op, which both stay)."""
    from benchmarks.measure import Timing, time_cpu_once
    from tfplace_widget._widgets.panel import PlacementPanel

    made: list[Any] = []
    panels = interleaved(
        {
            "one": lambda: made.append(PlacementPanel(one)),
            "cluster": lambda: made.append(PlacementPanel(cluster)),
        },
        repeats,
    )
    panel = made[-1]
    panel.search.value = "c1/add1"
    panel.table.selected_op = panel.visible_ops["op"].iloc[0]
    task = next(iter(panel.chips.fold_of))
    fold = Timing()
    for _ in range(repeats):
        for value in (True, False):
            wall, cpu, _ = time_cpu_once(
                lambda v=value: setattr(panel.chips.fold_of[task], "value", v)
            )
            fold.seconds.append(wall)
            fold.cpu.append(cpu)
    assert not panel.error, panel.error
    for each in made:
        each.close()
    return panels, fold


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    from tfplace_widget import trace_placement

    graph_def = make_graph_def(args.ops, devices=DEVICES)
    local_build, cluster_build = builder(graph_def), builder(on_tasks(graph_def))
    traces: dict[str, Any] = {}

    def one_machine() -> Any:
        traces["one"] = trace_placement(local_build, mode="graph", device_count={"CPU": DEVICES})

    def on_cluster() -> Any:
        traces["cluster"] = trace_placement(cluster_build, mode="graph", cluster=CLUSTER)

    with quiet_fds():
        one_machine(), on_cluster()  # warm-up: imports, kernel caches
        timings = interleaved({"one": one_machine, "cluster": on_cluster}, args.repeats)
        idle = sorted(idle_cluster_seconds() for _ in range(args.repeats))[args.repeats // 2]

    one, cluster = traces["one"], traces["cluster"]
    panels, fold = panel_timings(one, cluster, args.repeats)
    rows = [
        ("trace_placement, whole call", timings["one"].ms(), timings["cluster"].ms()),
        ("of which: start + stop the servers", "-", f"{idle * 1000:,.0f} ms (idle cluster)"),
        ("PlacementPanel(trace)", panels["one"].ms(), panels["cluster"].ms()),
        ("fold a task, then open it (each)", "-", fold.ms()),
        ("ops in trace.ops", f"{len(one.ops):,}", f"{len(cluster.ops):,}"),
        ("devices", f"{len(one.devices)}", f"{len(cluster.devices)}"),
        ("transfers", f"{len(one.transfers):,}", f"{len(cluster.transfers):,}"),
        (
            "of which cross_task",
            f"{int(one.transfers['cross_task'].sum()):,}",
            f"{int(cluster.transfers['cross_task'].sum()):,}",
        ),
        (
            "bytes moved",
            f"{int(one.transfers['bytes'].sum()):,}",
            f"{int(cluster.transfers['bytes'].sum()):,}",
        ),
    ]
    print(
        f"{args.ops:,}-op chains graph, {args.repeats} interleaved repeats (median, min-max); "
        f"one machine: device_count={{'CPU': {DEVICES}}}; cluster: {CLUSTER!r}, one CPU per task"
    )
    print()
    print("| | one machine | local cluster |")
    print("|---|---:|---:|")
    for name, a, b in rows:
        print(f"| {name} | {a} | {b} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
