"""A strategy trace's prediction put together from its tasks' (issue 36): what
:mod:`.strategy` (``MultiWorkerMirroredStrategy``) and :mod:`.parameter_servers`
(``ParameterServerStrategy``) share once each worker's step is predicted."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..._model.devices import device_sort_key
from ..._model.errors import TraceError
from ..._model.trace import STRATEGY_TASKS_RAW, PlacementTrace


def task_prefix(task: str) -> str:
    """``/job:worker/task:1`` -> ``/job:worker/replica:0/task:1``."""
    job, _, index = task.rpartition("/task:")
    return f"{job}/replica:0/task:{index}"


def gpu_words(gpus: int) -> str:
    """``1 GPU``, ``0 GPUs``: how many GPUs each worker has, in the prediction's words."""
    return f"{gpus} GPU" + ("" if gpus == 1 else "s")


def older_trace(strategy: str) -> TraceError:
    """The error for a trace made before its tasks recorded the step's own requests."""
    return TraceError(
        f"This trace of {strategy} was made by an older tfplace, which did not record what the "
        "step's own tf.device requests ask for on a worker with a GPU: trace it again "
        "(trace_placement(setup, cluster=...)) to predict it with GPUs."
    )


def more_gpus_refused(
    strategy: str, gpus: int, builds: str, only: str, instead: str = ""
) -> TraceError:
    """The error for ``gpus`` (2 or more) GPUs per worker: what ``strategy`` ``builds`` with
    them (a sentence), when only TensorFlow builds that graph (``only``, a clause), and what
    to call instead (``instead``, a sentence; by default, tracing where the GPUs are)."""
    return TraceError(
        f"predict_placement cannot predict {strategy} with gpus={gpus} per worker from this "
        f"trace (it predicts gpus=0 and gpus=1). With {gpus} GPUs on a worker {builds} The "
        f"trace holds the step TensorFlow built with one replica per worker, not that graph: "
        f"{only}. "
        + (
            instead
            or f"Use predict_placement(trace, gpus=1) for one GPU per worker, or trace the "
            f"program where each worker has its {gpus} GPUs."
        )
    )


def assembled(
    trace: Any,
    parts: list[PlacementTrace],
    ops: pd.DataFrame,
    transfers: pd.DataFrame,
    notes: list[str],
    gpus: int,
) -> PlacementTrace:
    """The predicted trace of ``trace`` from its tasks' predictions (``parts``), their ``ops``
    and ``transfers`` put together, ``notes`` first, then what TensorFlow would refuse."""
    notes = notes + [n for p in parts for n in p.notes if n.startswith("TensorFlow would refuse")]
    result = PlacementTrace(
        ops=ops,
        events=parts[0].events if parts else trace.events.iloc[0:0],
        transfers=transfers,
        devices=sorted({d for p in parts for d in p.devices}, key=device_sort_key),
        inputs=dict(trace.inputs),
        source=f"{trace.source or 'graph'} (predicted, {gpu_words(gpus)} per worker)",
        mode=trace.mode,
        notes=notes,
    )
    result.facts = trace.facts
    # the strategy's record, so that the findings are found per task as the trace's own are
    result.raw = {STRATEGY_TASKS_RAW: trace.raw[STRATEGY_TASKS_RAW]}
    result.predicted = True
    result.measured = None
    return result


def unplaced(trace: Any, facts: Any, devices: list[str]) -> PlacementTrace:
    """A graph TensorFlow built (not ran) as a trace for the predictor to place: its ops
    (``facts``: types and requests) with no device yet, on ``devices``, without events or
    transfers (``trace``'s columns)."""
    names = list(facts.types)
    return PlacementTrace(
        ops=pd.DataFrame(
            {
                "op": names,
                "type": [facts.types[n] for n in names],
                "device": [""] * len(names),
                "requested_device": [facts.requested[n] for n in names],
                "function": [""] * len(names),
            }
        ),
        events=trace.events.iloc[0:0],
        transfers=trace.transfers.iloc[0:0],
        devices=devices,
        inputs=dict(facts.inputs),
        source=trace.source,
        mode="function",
        facts=facts,
    )
