"""A finding's ``fix`` as data: the placement change that cures it, in two forms.

A fix is a plain dict (it is saved with the findings in a ``.tfplace`` file):

- ``overrides``: ``{op: device}``, the requests that simulate the change, for
  ``trace_placement(..., overrides=...)``, ``predict_placement`` and ``trace.try_fix``;
- ``edit``: the same change in the user's terms (which lines, and what ``tf.device`` to put
  around them; their ``file:line`` when the trace has the ``source`` column);
- ``no_fix``: why no placement change the user can make cures it ("" when there is one);
- ``not_simulable``: why ``overrides`` cannot simulate ``edit`` ("" when they do): an edit that
  moves code out of the step (into ``dataset.map``) or changes a dtype is no device request.

Only findings whose cure is a placement change the user makes in their own code get
``overrides``, and only those can be tried (``trace.try_fix``); a finding whose cure is another
edit at the user's line gets ``edit`` with ``not_simulable``; a finding that nothing in the
user's code causes gets ``no_fix`` with the reason, never an invented change; every other
finding has ``fix`` None (no claim either way). Files written before ``not_simulable`` existed
hold the first three keys only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import chain, filterfalse, repeat
from operator import add, eq
from typing import Any

import numpy as np
import pandas as pd

from ..._model.devices import parse_device, short_device
from .base import REPLICA, Context, listed_names, listed_ops, replicated
from .tasks import PART_TASK

_NO_SOURCE = frozenset({"", "<NA>", None})  # an op without a source line (``sources``)
FIX_KEYS = ("overrides", "edit", "no_fix", "not_simulable")


def placement_fix(
    context: Context,
    movers: Sequence[str],
    device: str,
    partners: Sequence[str],
    listed: Callable[[], tuple[str, str]] | None = None,
) -> dict[str, Any]:
    """Put ``movers`` (and the ops their lines make with them: constants and shapes in their
    name scope that only feed them) on ``device``, beside ``partners``. ``listed``: the
    ``listed_ops`` of movers and partners, when the finding's message has them made (a
    large finding's lists are hundreds of thousands of names)."""
    target = as_written(context, device)
    # the movers, then their internals (the keys of ``_with_their_internals`` in its order):
    # one dict of a large finding's hundreds of thousands of names, not two and a list
    overrides = dict.fromkeys(chain(movers, _internals(context, movers)), target)
    request = _one_request(context, movers)
    where = sources(context, movers)
    lines = f"the lines that make them{where}"
    if request:
        change = (
            f"change the tf.device({as_written(context, request)!r}) around {lines} to "
            f"tf.device({target!r})"
        )
        if replicated(context) and any(asked_by_the_step(context, op) for op in movers):
            # one line of the step makes them in every replica: each replica's device is its own
            change = (
                f"drop the tf.device({as_written(context, request)!r}) around {lines} (inside "
                "the function strategy.run runs, the strategy then puts them on each "
                "replica's own device)"
            )
    else:
        change = f"wrap {lines} in `with tf.device({target!r}):`"
    named, beside = listed() if listed is not None else (listed_ops(movers), listed_ops(partners))
    edit = f"put {named} on {_shown(target)} with {beside}: {change}."
    return {"overrides": overrides, "edit": edit, "no_fix": "", "not_simulable": ""}


def _one_request(context: Context, movers: Sequence[str]) -> str:
    """The device request all ``movers`` share, "" when they have none or differ: read until
    the first that differs (a large finding's movers on four CPUs differ within a few)."""
    asked = map(context.requested.get, movers, repeat(""))
    first = next(asked, "")
    return first if all(map(eq, asked, repeat(first))) else ""


def variable_fix(
    context: Context, variables: Sequence[str], device: str, readers: Sequence[str]
) -> dict[str, Any]:
    """Create ``variables`` on ``device``, where ``readers`` compute with them: a ``tf.device``
    at the line that creates them. Simulated by requests on the variables' own ops
    (``VarHandleOp``) and on the ops tied to them by their resource (reads, initializers: the
    placer puts those with the variable whatever they ask), when the variables are made in the
    traced graph; made outside it (eagerly, before a ``tf.function`` reads them through its
    arguments), no request inside the function moves them, and the edit is given untried."""
    target = as_written(context, device)
    facts = getattr(context.trace, "facts", None)
    resource_inputs = getattr(facts, "resource_inputs", {}) if facts is not None else {}
    tied = [op for op, held in resource_inputs.items() if set(held) & set(variables)]
    made_here = all(context.type_of.get(v, "").startswith("VarHandleOp") for v in variables)
    one = len(variables) == 1
    it = "it" if one else "them"
    if made_here:
        what, where = listed_names(list(variables)), sources(context, variables)
    else:  # a function's resource arguments: named by the ops that read them
        what = f"the variable{'s' * (not one)} {listed_ops(tied)} use{'s' * (len(tied) == 1)}"
        where = " (outside the traced function, which gets the variable as an argument)"
    how = (
        f"create {it} under the distribution strategy's scope (strategy.scope())"
        if replicated(context)
        else f"wrap the line{'s' * (not one)} that create{'s' * one} {it}{where} in "
        f"`with tf.device({target!r}):`"
    )
    edit = (
        f"create {what} on {_shown(target)}, where {listed_ops(readers)} "
        f"compute{'s' * (len(readers) == 1)} with {it}: {how}."
    )
    if not made_here:
        return edit_fix(
            edit,
            "the variables are made outside the traced function (it reads them through its "
            "resource arguments), where overrides= does not reach: only the code that creates "
            "them can move them",
        )
    overrides = dict.fromkeys([*variables, *tied], target)
    return {"overrides": overrides, "edit": edit, "no_fix": "", "not_simulable": ""}


def edit_fix(edit: str, not_simulable: str) -> dict[str, Any]:
    """A cure the user applies in their own code that is no device request (moving a call into
    ``dataset.map``, a cast), so ``overrides`` cannot try it: the edit, and why it is untried."""
    return {"overrides": None, "edit": edit, "no_fix": "", "not_simulable": not_simulable}


def no_fix(reason: str) -> dict[str, Any]:
    """A finding no placement change in the user's code cures, and why."""
    return {"overrides": None, "edit": "", "no_fix": reason, "not_simulable": ""}


def _with_their_internals(context: Context, movers: Sequence[str]) -> list[str]:
    """``movers`` and, for each, the ops in its name scope (``A/Const``, ``A/shape_as_tensor``)
    that feed it: the one call that made it made those too, and a ``tf.device`` around that
    line moves them with it (left behind, each would be a copy of its own)."""
    return list(dict.fromkeys(chain(movers, _internals(context, movers))))


def _internals(context: Context, movers: Sequence[str]) -> list[str]:
    """The ops in the ``movers``' name scopes that feed them (``_with_their_internals``),
    each mover's in the order a walk up its producers finds them; repeats are kept."""
    found: list[str] = []
    inputs = context.inputs
    for mover in _with_own_producers(inputs, movers):
        stack = list(inputs.get(mover, ()))
        seen: set[str] = set()
        scope = mover + "/"
        while stack:
            producer = stack.pop()
            # the scope first: most producers (of a million) are no mover's own
            if not producer.startswith(scope) or producer in seen:
                continue
            seen.add(producer)
            found.append(producer)
            stack += inputs.get(producer, ())
    return found


def _with_own_producers(inputs: Mapping[str, Sequence[str]], movers: Sequence[str]) -> list[str]:
    """The ``movers`` that some producer in their own name scope feeds, in their order: one C
    pass over all their producers (a large finding's hundreds of thousands, nearly all of them
    in no mover's scope), not a Python loop over each mover's."""
    movers = list(movers)
    lists = list(map(inputs.get, movers, repeat(())))
    lengths = list(map(len, lists))
    scopes = chain.from_iterable(map(repeat, map(add, movers, repeat("/")), lengths))
    hits = list(map(str.startswith, chain.from_iterable(lists), scopes))
    if not any(hits):
        return []
    owner = np.repeat(np.arange(len(lengths)), lengths)[np.asarray(hits, dtype=bool)]
    return [movers[i] for i in np.unique(owner).tolist()]


def sources(context: Context, ops: Sequence[str]) -> str:
    """`` (file.py:42 in f, ...)``: where the user's code made ``ops``, when the trace has the
    ``source`` column; "" without it."""
    frame = context.ops
    if "source" not in frame:
        return ""
    if context.source_of is None:  # once per trace: a scan of every row per finding is quadratic
        column = frame["source"]  # (two columns, not the frame)
        # compared where set, not hashed (isin): a million-op graph's rows are all "" or NA
        values = column.to_numpy(dtype=object)
        known = pd.notna(values)
        set_values = values[known]
        known[known] = (set_values != "") & (set_values != "<NA>")
        lines = column[known].astype(str).tolist()
        context.source_of = _Sources(
            zip(frame["op"][known].astype(str).tolist(), lines, strict=True)
        )
        context.source_of.lines = len(set(lines))
    source_of = context.source_of
    # in the order of the ops named, each line once; done when every line of the trace is
    # found (a finding may name 100,000s of ops, made by a few lines, or none)
    every = getattr(source_of, "lines", None)
    if not source_of:
        return ""
    found: dict[str, None] = {}
    for line in filterfalse(_NO_SOURCE.__contains__, map(source_of.get, ops)):
        found[line] = None
        if len(found) == every:
            break
    return f" ({listed_names(list(found))})" if found else ""


class _Sources(dict):
    """``Context.source_of``: op -> its source line, and how many distinct lines there are
    (``lines``), so that ``sources`` stops looking once it has found them all."""

    lines: int | None = None


def as_written(context: Context, device: str) -> str:
    """A device as the user writes it in ``tf.device``: ``/GPU:0``; in a cluster, with its
    task, ``/job:ps/task:1/CPU:0``; in a strategy's step (one task's part of the trace), the
    task's own ``/GPU:0``, since every worker runs that same code."""
    short = short_device(device) or device.lstrip("/")
    if getattr(context.trace, PART_TASK, ""):
        short = short.rsplit("/", 1)[-1]
    return short if short.startswith("/") else "/" + short


def _shown(target: str) -> str:
    """``target`` in a sentence: ``GPU:0``, or with its task ``/job:ps/task:1/CPU:0``."""
    return target if target.startswith("/job:") else target[1:]


def asked_by_the_step(context: Context, name: str) -> bool:
    """Whether ``name``'s device request is one the step's own code makes for every replica
    alike: it and its twin in another replica (``replica_1/X`` for ``X``, ``X`` for
    ``replica_K/X``) ask for the same device. A strategy gives each replica a device scope of
    its own, so a request the replicas share is a ``tf.device`` in the function handed to
    ``strategy.run``: the user's, theirs to change."""
    asked = context.requested.get(name, "")
    if not asked:
        return False
    twin = REPLICA.sub(r"\1", name, count=1) if REPLICA.search(name) else f"replica_1/{name}"
    other = context.requested.get(twin, "")
    return bool(other) and _local_device(asked) == _local_device(other)


def _local_device(name: str) -> tuple[str | None, int | None]:
    """A device's type and index, whichever task it is on."""
    try:
        spec = parse_device(name)
    except ValueError:
        return (name, None)
    return (spec.type, spec.index)
