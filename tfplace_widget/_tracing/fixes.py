"""Trying fixes: ``try_fix`` runs the traced code again as it is and with one finding's fix
(its ``overrides``), ``suggest_placement`` with every fix that verified, together, and both
measure the difference (``_analyses/fix_effect.py``).

The code runs ``TRY_STEPS`` traced steps each way (at least; more when the trace had more), so
that the step time has a spread. A finding about a machine with a GPU that this one does not
have (``predicted``) is checked against ``predict_placement`` with and without the fix: a
prediction, said so; when a CPU of this machine is free, both predicted placements also run here
with it standing in for the GPU, for the outputs and TensorFlow's acceptance of the placement.

TF2 code keeps its state between calls: a training step changes its weights, its optimizer's
slots and iteration counter, its RNG states at every call. So that each run starts from the same
state, and the user's model is left as it was, the values of the variables the code's calls
reach (``user_state.KeptState``) are read before anything runs, written back before each run
and after the last. The outputs are then compared call by call: each traced call of one run
with the same call of the other, and the variables' values after the runs (floats within a
tolerance); when they differ, the code as it is runs once more from the same state, and if that
differs too the code keeps state the variables do not hold (Python state, random ops' kernels):
not compared, said. What cannot be put back (an iterator's position, variables made during the
runs) is said, and the outputs are not compared.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import pandas as pd

from .._analyses.fix_effect import (
    ATOL,
    RTOL,
    FixEffect,
    log_agrees,
    measure,
    outputs_equal,
    step_change,
    step_times,
    verdict,
)
from .._model.devices import short_device
from .._model.trace import PlacementTrace
from .recipe import Recipe, recipe_of, recipe_or_none
from .user_state import KeptState

TRY_STEPS = 5


class _Ran(NamedTuple):
    """One run of the code: its trace; what its traced calls returned, as data (each call's,
    TF2 code; the last step's fetches, a graph builder; None for a prediction); the values of
    the variables kept (``KeptState``) after it."""

    trace: PlacementTrace
    calls: list[Any] | None
    variables: list[Any]


def try_fix(trace: PlacementTrace, finding: Any, recipe: Recipe | None = None) -> FixEffect:
    """Run the code ``trace`` was made from with ``finding``'s fix and measure what changed.
    TF2 code runs each time from the state it had before (the variables its calls reach,
    written back), and is left in it (see the module's docstring).

    Args:
        trace: A trace made by ``trace_placement`` in this process.
        finding: A row of ``trace.findings`` (or ``all_findings``), its index in
            ``trace.findings``, or ``(kind, ops)``.
        recipe: How to run the code again, when not the trace's own (the panel's builder,
            arguments and options).

    Returns:
        The measured effect; ``verified`` says whether the fix holds.

    Raises:
        ValueError: The trace has no code to re-run (loaded, predicted), or the finding has no
            fix to try (the message gives its ``no_fix`` reason).
    """
    recipe = recipe or recipe_of(trace, "try_fix")
    row = _finding_row(trace, finding)
    overrides = _overrides_of(row)
    with _kept(trace, recipe) as state:
        return _tried(recipe, overrides, row, None, state)


def suggest_placement(trace: PlacementTrace, recipe: Recipe | None = None) -> FixEffect:
    """Try every fix of ``trace.findings``, then apply the ones that verified together and
    measure them against the code as it is (``trials`` holds each fix's own effect).

    Args:
        trace: A trace made by ``trace_placement`` in this process.
        recipe: How to run the code again, when not the trace's own (the panel's builder,
            arguments and options).

    Raises:
        ValueError: As ``try_fix``'s, or when no finding has a fix to try.
    """
    recipe = recipe or recipe_of(trace, "suggest_placement")
    findings = trace.findings
    rows = [row for _, row in findings.iterrows() if (row["fix"] or {}).get("overrides")]
    if not rows:
        raise ValueError(
            "suggest_placement: none of this trace's findings has a placement fix to try "
            "(trace.findings['fix'] says why for each)."
        )
    with _kept(trace, recipe) as state:
        return _suggested(recipe, rows, state)


def _suggested(recipe: Recipe, rows: list[pd.Series], state: KeptState | None) -> FixEffect:
    # each fix against the code as it is, run (a measured finding's) or predicted for a GPU
    # machine (a predicted one's): one baseline of each, made when first needed
    baselines: dict[bool, _Ran] = {}
    trials = []
    for row in rows:
        predicted = bool(row["predicted"])
        if predicted not in baselines:
            baselines[predicted] = _run(recipe, {}, predicted, state)
        trials.append(_tried(recipe, row["fix"]["overrides"], row, baselines[predicted], state))
    kept, conflicts = _compatible([t for t in trials if t.verified])
    # together: on a GPU machine when any kept fix is about one (its devices are this
    # machine's plus a GPU, so the others' requests hold there too)
    predicted = any(t.predicted for t in kept)
    baseline = baselines.get(predicted) or baselines[not predicted]
    if not kept:
        reasons = "; ".join(f"{t.edit or t.overrides}: {t.why}" for t in trials)
        effect = measure(
            baseline.trace,
            baseline.trace,
            kinds=[],
            overrides={},
            outputs_equal=True,
            notes=[f"no fix verified ({reasons})"],
        )
        effect.verified, effect.why, effect.trials = False, "no fix verified", trials
        return effect
    combined: dict[str, str] = {}
    for trial in kept:
        combined.update(trial.overrides)
    kinds = {kind for trial in kept for kind in trial.kinds}
    edits = " ".join(t.edit for t in kept)
    effect = _compared(recipe, baseline, combined, kinds, edits, predicted, state)
    effect.trials = trials
    effect.notes += conflicts
    return effect


def _compatible(verified: list[FixEffect]) -> tuple[list[FixEffect], list[str]]:
    """The verified fixes that can be applied together, in the findings' order: one that asks
    for another device for an op an earlier one moves is left out, and a note says so."""
    kept: list[FixEffect] = []
    asked: dict[str, str] = {}
    notes = []
    for trial in verified:
        clash = sorted(
            op for op, device in trial.overrides.items() if asked.get(op, device) != device
        )
        if clash:
            notes.append(
                f"left out, verified alone but asking for other devices for {', '.join(clash)} "
                f"than a fix before it: {trial.edit}"
            )
            continue
        kept.append(trial)
        asked.update(trial.overrides)
    return kept, notes


@contextlib.contextmanager
def _kept(trace: PlacementTrace, recipe: Recipe) -> Iterator[KeptState | None]:
    """The values of the variables the traced code's calls reached (the trace's and the
    recipe's records of them), kept for the block and written back after it; None when the
    code reached none (a graph builder runs in a fresh graph each time)."""
    own = recipe_or_none(trace)
    handed = {**(own.handed if own is not None else {}), **recipe.handed}
    state = KeptState(handed) if handed else None
    owner = getattr(recipe.fn, "__self__", None)  # a bound method's object: a Keras model's fit
    history = getattr(owner, "history", _NONE)
    try:
        yield state
    finally:
        if state is not None:
            state.restore()
        if history is not _NONE:  # model.fit sets model.history: the user's last fit's, kept
            owner.history = history


_NONE = object()  # an attribute the object did not have


def _tried(
    recipe: Recipe,
    overrides: Mapping[str, str],
    row: pd.Series,
    baseline: _Ran | None,
    state: KeptState | None,
) -> FixEffect:
    predicted = bool(row["predicted"])
    if baseline is None:
        baseline = _run(recipe, {}, predicted, state)
    edit = (row["fix"] or {}).get("edit", "")
    return _compared(recipe, baseline, overrides, {row["kind"]}, edit, predicted, state)


def _compared(
    recipe: Recipe,
    baseline: _Ran,
    overrides: Mapping[str, str],
    kinds: set[str],
    edit: str,
    predicted: bool,
    state: KeptState | None,
) -> FixEffect:
    before = baseline.trace
    ran = _run(recipe, overrides, predicted, state)
    after = ran.trace
    notes = []
    stand_in = None
    if predicted:
        equal = None
        notes.append(
            "checked against predict_placement with and without the overrides: this machine "
            "has no GPU, so nothing ran with the fix"
        )
        stand_in = _on_the_stand_in(recipe, before, after, state)
        if stand_in is not None:
            equal = stand_in["outputs_equal"]
            notes.append(stand_in["note"])
    else:
        equal, said = _results_compared(recipe, state, baseline, ran, {})
        notes += said
    effect = measure(
        before, after, kinds=kinds, overrides=overrides, edit=edit, outputs_equal=equal, notes=notes
    )
    if stand_in is not None and stand_in["times"] is not None:
        effect.stand_in = stand_in["times"], stand_in["log_agrees"]
        effect.tf_log_agrees = stand_in["log_agrees"]
        effect.verified, effect.why = verdict(effect)
    if effect.step_change == "slower" and not predicted:
        # Load on the machine can slow one whole run: a slower step must show twice to count,
        # in a second pair of runs made in the other order (the fix first), so that load
        # rising over the runs slows the fix's run in one pair and the code's in the other.
        second_fix = _run(recipe, overrides, False, state).trace
        again = measure(
            _run(recipe, {}, False, state).trace,
            second_fix,
            kinds=kinds,
            overrides=overrides,
            edit=edit,
            outputs_equal=equal,
            notes=notes,
        )
        if again.step_change != "slower":
            effect = again
            effect.notes.append("slower in a first pair of runs, not in a second: noise")
    return effect


def _results_compared(
    recipe: Recipe,
    state: KeptState | None,
    baseline: _Ran,
    ran: _Ran,
    baseline_overrides: Mapping[str, str],
) -> tuple[bool | None, list[str]]:
    """Whether ``ran`` returned what ``baseline`` (run with ``baseline_overrides``) did, call by
    call, and left the kept variables equal (floats within ``RTOL``/``ATOL``); None when that
    cannot be told. With the notes that say how it was told, or why not."""
    if state is not None and state.unrestorable:
        return None, [f"outputs not compared: {'; '.join(state.unrestorable)}"]
    if not baseline.calls or not ran.calls:
        return None, [
            "outputs not compared: the runs returned nothing to compare (TF2 code traced on a "
            "cluster's tasks returns its results there)"
        ]
    held = (
        f", and the {state.variables} variables the calls reach (weights, optimizer slots and "
        "counters, RNG states) after them; each run started from the same values, put back "
        "before it (and after the last run, as they were before)"
        if state is not None
        else ""
    )
    what = (
        f" call by call: the {len(ran.calls)} traced calls of each run, the first of one with "
        f"the first of the other and so on{held}"
        if ran.trace.mode == "function"
        else ": the last traced step's fetches of each run (a graph builder's, in a fresh graph)"
    )
    how = f"outputs compared{what} (floats within rtol={RTOL}, atol={ATOL})"
    if _same_results(baseline, ran):
        return True, [how]
    again = _run(recipe, baseline_overrides, False, state)
    if state is not None and state.unrestorable:
        return None, [f"outputs not compared: {'; '.join(state.unrestorable)}"]
    if not _same_results(baseline, again):
        fit = (
            "; it makes a tf.data iterator for each call (model.fit does), whose shuffle "
            "draws new random seeds every time: set a global seed "
            "(keras.utils.set_random_seed(...)) or pass shuffle=False to try fixes of it"
            if state is not None and state.made_iterators()
            else ""
        )
        start = " from the same variables" if state is not None else ""
        return None, [
            f"outputs not compared: the code as it is, run twice{start}, returned different "
            "results, so they depend on more than its variables (Python state, random ops that "
            f"keep their state in their kernels, such as tf.random.uniform without a seed){fit}"
        ]
    return False, [
        f"{how}: different, while the code as it is, run again from the same state, returned "
        "the same results"
    ]


def _same_results(a: _Ran, b: _Ran) -> bool:
    """Two runs' calls returned equal results, one by one, and left the kept variables equal."""
    calls_a, calls_b = a.calls or [], b.calls or []
    return (
        len(calls_a) == len(calls_b)
        and all(outputs_equal(x, y) for x, y in zip(calls_a, calls_b, strict=True))
        and outputs_equal(a.variables, b.variables)
    )


def _on_the_stand_in(
    recipe: Recipe, before: PlacementTrace, after: PlacementTrace, state: KeptState | None
) -> dict[str, Any] | None:
    """The predicted placements without and with a fix, run for real on this machine with a
    CPU no op predicted on a CPU uses (``_free_cpu``) in place of GPU:0: every op predicted
    on a GPU asked for it. What a CPU can tell of the fix: whether TensorFlow accepts the
    placement (its log) and the outputs stay equal; its copies and step time there are said,
    not judged (a CPU's speed says nothing of a GPU's). None when no CPU is free: the code ran
    on one (``device_count={"CPU": 2}``, or two logical CPUs, gives a second), or asked for
    each."""
    stand_in = _free_cpu(before)
    if not stand_in:
        return None
    runs, asked = [], []
    try:
        for predicted in (before, after):
            ops = predicted.ops
            ran = ops["traced_device"].fillna("").astype(str) != ""  # the step's, not init's
            ops = ops[ran & (ops["how"].astype(str) != "runtime")]
            on_gpu = ops[ops["device"].map(lambda d: (short_device(d) or "").startswith("GPU"))]
            asked.append(dict.fromkeys(on_gpu["op"].astype(str), stand_in))
            runs.append(_run(recipe, asked[-1], False, state))
        equal, compared = _results_compared(recipe, state, runs[0], runs[1], asked[0])
    except Exception as exc:  # the prediction stands; say why it was not also run here
        return {
            "outputs_equal": None,
            "times": None,
            "log_agrees": None,
            "note": f"not run with {stand_in[1:]} standing in for GPU:0: "
            f"{type(exc).__name__}: {exc}",
        }
    a, b = runs[0].trace, runs[1].trace
    times = (step_times(a), step_times(b))
    agrees = log_agrees(b)
    said = {True: "equal", False: "different", None: "not compared"}[equal]
    return {
        "outputs_equal": equal,
        "times": times,
        "log_agrees": agrees,
        "note": (
            f"run on this machine with {stand_in[1:]} standing in for GPU:0 (every op "
            f"predicted on the GPU asked for it): copies {len(a.transfers)} -> "
            f"{len(b.transfers)}, outputs {said}, TensorFlow's placement log "
            f"{ {True: 'agrees', False: 'disagrees', None: 'not read'}[agrees] }, step time "
            f"{step_change(*times)}" + "".join(f"; {note}" for note in compared)
        ),
    }


def _free_cpu(predicted: PlacementTrace) -> str:
    """A CPU of the machine the code ran on that no op predicted on a CPU uses (the last
    such), as ``/CPU:N``: "" when there is none (one CPU, or the code asked for each)."""
    ops = predicted.ops[predicted.ops["how"].astype(str) != "runtime"]
    used = {short_device(d) for d in ops["device"].astype(str)}
    cpus = [short_device(d) for d in predicted.devices if (short_device(d) or "").startswith("CPU")]
    free = [cpu for cpu in cpus if cpu not in used]
    return f"/{free[-1]}" if len(cpus) > 1 and free else ""


def _run(
    recipe: Recipe, overrides: Mapping[str, str], predicted: bool, state: KeptState | None
) -> _Ran:
    """The recipe's code traced (or, for a predicted finding, predicted with one GPU), with
    ``overrides`` on top of its own, from the kept state (written back first)."""
    from . import predict, tracer

    steps = max(int(recipe.options.get("steps", 1)), TRY_STEPS)
    if predicted:
        options = recipe.with_options(overrides=dict(overrides))
        gpus = options.pop("gpus", 1)
        return _Ran(
            predict.predict_placement(recipe.fn, gpus, args=recipe.args, **options), None, []
        )
    options = recipe.with_options(steps=steps, overrides=dict(overrides))
    if not options["overrides"]:
        options.pop("overrides")
    if state is not None:
        state.restore()
    outputs: list[Any] = []
    trace = tracer.traced_again(recipe.fn, recipe.args, options, outputs)
    if state is None:
        return _Ran(trace, [_as_data(got) for got in outputs], [])
    variables = state.values()
    state.saw(recipe_of(trace, "try_fix").handed)
    return _Ran(trace, [_as_data(got) for got in outputs], variables)


def _as_data(got: Any) -> Any:
    """What a call returned, as data to compare: a Keras ``History`` (``model.fit``'s) by the
    metrics it holds per epoch, anything else as it is."""
    history = getattr(got, "history", None)
    if isinstance(history, dict) and hasattr(got, "on_epoch_end"):
        return history
    return got


def _finding_row(trace: PlacementTrace, finding: Any) -> pd.Series:
    """The findings row ``finding`` names."""
    if isinstance(finding, pd.Series):
        return finding
    findings = trace.findings
    if isinstance(finding, int) and not isinstance(finding, bool):
        if finding not in findings.index:
            raise ValueError(
                f"trace.findings has no row {finding} (it has {len(findings)}): pass a row of "
                "trace.findings, its index, or (kind, ops)."
            )
        return findings.loc[finding]
    if isinstance(finding, tuple) and len(finding) == 2:
        kind, ops = finding
        every = trace.all_findings
        for _, row in every.iterrows():
            if row["kind"] == kind and set(ops) <= set(row["ops"]):
                return row
        raise ValueError(f"No {kind} finding about {', '.join(ops)} in this trace.")
    raise TypeError(
        f"try_fix takes a row of trace.findings, its index, or (kind, ops), not "
        f"{type(finding).__name__}."
    )


def _overrides_of(row: pd.Series) -> dict[str, str]:
    fix = row.get("fix")
    if fix and fix.get("not_simulable"):
        raise ValueError(
            f"This {row['kind']} finding's fix cannot be tried: {fix['not_simulable']}. Make "
            f"the edit in your code and trace again: {fix['edit']}"
        )
    if not fix or not fix.get("overrides"):
        reason = (fix or {}).get("no_fix") or "it names no placement change to simulate"
        raise ValueError(f"This {row['kind']} finding has no fix to try: {reason}.")
    return dict(fix["overrides"])
