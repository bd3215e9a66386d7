"""Predicted placement: where TensorFlow's placer would put every op on a machine with GPUs.

The placer's decision is a pure function of the graph as built (requests, ``_class`` colocation,
resource/ref edges, the kernels registered for each node def's attrs) and of the device set, so
it can be replayed here for a device set this machine does not have. This module follows
core/common_runtime/placer.cc and colocation_graph.cc (TF 2.21) step by step:

1. every node is a member with its supported device types (kernels for its attrs, with their
   priorities) and its (partial) requested device; a no-input op whose single output is a
   resource or ref (``VarHandleOp``, ``VariableV2``) holds its request as a *resource device*;
2. resource and ref edges, and variant edges between dataset ops, join producer and consumer
   (the consumer's request gives way to the producer's; incompatible resource devices fail);
3. ``_class: loc:@X`` groups are joined; an impossible join is dropped under soft placement and
   fails without it;
4. nodes are placed in graph order: the group's candidates are the devices matching its merged
   request with a supported type (soft placement drops the unmet type and index), sorted by
   kernel priority, then device type priority (GPU before CPU), then the session's own task
   before the other tasks of a cluster, then name; the first is taken,
   except that metadata ops (Shape, Size, Rank, ShapeN) and a lone Identity take their input's
   device when it is a candidate (the Identity only where this TensorFlow's placer does so: not
   in 2.16: the handed-in registry's ``identity_follows_its_input``); placing a node pins its
   whole group there;
5. generators (no inputs, one non-ref output) come last and join their consumers when these
   all share one candidate device;
6. in a function graph, an ``_Arg`` is already where the caller's value is (a resource's: where
   the resource would be made with the GPUs, see :mod:`.resources`), a ``_Retval`` takes the
   device its value asked for (``PinArgsAndRets``), and a ``tf.device`` around the call is the
   function's default device (tried first), not a request.

Nodes outside any group and outside the heuristics depend only on their op type, kernels and
request, so they are decided once per distinct combination; the others go through the steps
above one by one (see :class:`.placer._Placer`).

:func:`predict_devices` is the pure core (no session, no trace); :func:`.result.predict_trace`
wraps it into a :class:`~tfplace_widget._model.trace.PlacementTrace` marked ``predicted``, and
:func:`tfplace_widget.predict_placement` (a function or a trace) traces a function first, which
is the tracing layer's job (:mod:`tfplace_widget._tracing.predict`). With ``gpus=0`` on this
machine the prediction must equal what TensorFlow did (tests/analyses/test_predict.py).

The parts, one job each: :mod:`.devices` (device-name maths, the prediction's device set),
:mod:`.cache` (what every prediction of one GraphFacts shares), :mod:`.nodes` (the placer's
view of a node), :mod:`.colocation` (colocation groups and candidate devices), :mod:`.placer`
(the simulation), :mod:`.reasons` (``how`` and ``reason``),
:mod:`.transfers` (predicted copies) and :mod:`.result` (the frame and the predicted trace).
Nothing here runs TensorFlow: what its registries and placer say (kernels and their
priorities, outputs, what this version's placer does where versions differ) is handed in
(:class:`~tfplace_widget._model.kernel_registry.KernelRegistry`), by default with the facts
(``GraphFacts.registry``); :func:`~tfplace_widget._tracing.predict.predict_placement` hands in
this process's (:mod:`tfplace_widget._tfadapter.registry`), and reads node details from a
GraphDef (:func:`~tfplace_widget._tfadapter.graphfacts.node_details`).
Names with a leading underscore are this package's internals, shared between its modules and
not used outside it (benchmarks aside).
"""

from __future__ import annotations

from .devices import HOST, gpu_devices, master_task, predicted_devices
from .result import PREDICTED_COLUMNS, predict_devices, predict_trace
from .transfers import TRANSFER_PREDICTED_COLUMNS, predict_transfers

__all__ = [
    "HOST",
    "PREDICTED_COLUMNS",
    "TRANSFER_PREDICTED_COLUMNS",
    "gpu_devices",
    "master_task",
    "predict_devices",
    "predict_trace",
    "predict_transfers",
    "predicted_devices",
]
