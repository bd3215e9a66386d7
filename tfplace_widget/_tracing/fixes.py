"""Trying fixes: ``try_fix`` runs the traced code again as it is and with one finding's fix
(its ``overrides``), ``suggest_placement`` with every fix that verified, together, and both
measure the difference (``_analyses/fix_effect.py``).

The code runs ``TRY_STEPS`` traced steps each way (at least; more when the trace had more), so
that the step time has a spread. A finding about a machine with a GPU that this one does not
have (``predicted``) is checked against ``predict_placement`` with and without the fix: a
prediction, said so; when a CPU of this machine is free, both predicted placements also run here
with it standing in for the GPU, for the outputs and TensorFlow's acceptance of the placement.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from .._analyses.fix_effect import (
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
from .recipe import Recipe, recipe_of

TRY_STEPS = 5


def try_fix(trace: PlacementTrace, finding: Any, recipe: Recipe | None = None) -> FixEffect:
    """Run the code ``trace`` was made from with ``finding``'s fix and measure what changed.

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
    return _tried(recipe, overrides, row, None)


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
    # each fix against the code as it is, run (a measured finding's) or predicted for a GPU
    # machine (a predicted one's): one baseline of each, made when first needed
    baselines: dict[bool, tuple[PlacementTrace, Any]] = {}
    trials = []
    for row in rows:
        predicted = bool(row["predicted"])
        if predicted not in baselines:
            baselines[predicted] = _run(recipe, {}, predicted)
        trials.append(_tried(recipe, row["fix"]["overrides"], row, baselines[predicted]))
    kept, conflicts = _compatible([t for t in trials if t.verified])
    # together: on a GPU machine when any kept fix is about one (its devices are this
    # machine's plus a GPU, so the others' requests hold there too)
    predicted = any(t.predicted for t in kept)
    baseline = baselines.get(predicted) or baselines[not predicted]
    if not kept:
        reasons = "; ".join(f"{t.edit or t.overrides}: {t.why}" for t in trials)
        effect = measure(
            baseline[0],
            baseline[0],
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
    effect = _compared(recipe, baseline, combined, kinds, " ".join(t.edit for t in kept), predicted)
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


def _tried(
    recipe: Recipe,
    overrides: Mapping[str, str],
    row: pd.Series,
    baseline: tuple[PlacementTrace, Any] | None,
) -> FixEffect:
    predicted = bool(row["predicted"])
    if baseline is None:
        baseline = _run(recipe, {}, predicted)
    edit = (row["fix"] or {}).get("edit", "")
    return _compared(recipe, baseline, overrides, {row["kind"]}, edit, predicted)


def _compared(
    recipe: Recipe,
    baseline: tuple[PlacementTrace, Any],
    overrides: Mapping[str, str],
    kinds: set[str],
    edit: str,
    predicted: bool,
) -> FixEffect:
    before, before_outputs = baseline
    after, after_outputs = _run(recipe, overrides, predicted)
    notes = []
    stand_in = None
    if predicted:
        equal = None
        notes.append(
            "checked against predict_placement with and without the overrides: this machine "
            "has no GPU, so nothing ran with the fix"
        )
        stand_in = _on_the_stand_in(recipe, before, after)
        if stand_in is not None:
            equal = stand_in["outputs_equal"]
            notes.append(stand_in["note"])
    elif before_outputs is None or after_outputs is None:
        equal = None
        notes.append(
            "outputs not compared: the code's last two traced calls returned different "
            "results (TF2 code keeps its state, such as variables and iterators, between calls)"
        )
    else:
        equal = outputs_equal(before_outputs, after_outputs)
    effect = measure(
        before, after, kinds=kinds, overrides=overrides, edit=edit, outputs_equal=equal, notes=notes
    )
    if stand_in is not None and stand_in["times"] is not None:
        effect.stand_in = stand_in["times"], stand_in["log_agrees"]
        effect.tf_log_agrees = stand_in["log_agrees"]
        effect.verified, effect.why = verdict(effect)
    if effect.step_change == "slower" and not predicted:
        # Load on the machine can slow one whole run: a slower step must show twice, in a
        # second pair of runs, to count.
        again = measure(
            _run(recipe, {}, False)[0],
            _run(recipe, overrides, False)[0],
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


def _on_the_stand_in(
    recipe: Recipe, before: PlacementTrace, after: PlacementTrace
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
    runs = []
    try:
        for predicted in (before, after):
            ops = predicted.ops
            ran = ops["traced_device"].fillna("").astype(str) != ""  # the step's, not init's
            ops = ops[ran & (ops["how"].astype(str) != "runtime")]
            on_gpu = ops[ops["device"].map(lambda d: (short_device(d) or "").startswith("GPU"))]
            runs.append(_run(recipe, dict.fromkeys(on_gpu["op"].astype(str), stand_in), False))
    except Exception as exc:  # the prediction stands; say why it was not also run here
        return {
            "outputs_equal": None,
            "times": None,
            "log_agrees": None,
            "note": f"not run with {stand_in[1:]} standing in for GPU:0: "
            f"{type(exc).__name__}: {exc}",
        }
    (a, a_outputs), (b, b_outputs) = runs
    equal = None if a_outputs is None or b_outputs is None else outputs_equal(a_outputs, b_outputs)
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
            f"{step_change(*times)}"
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
    recipe: Recipe, overrides: Mapping[str, str], predicted: bool
) -> tuple[PlacementTrace, Any]:
    """The recipe's code traced (or, for a predicted finding, predicted with one GPU), with
    ``overrides`` on top of its own; and what its last step fetched."""
    from . import predict, tracer
    from .recipe import recipe_of as made

    steps = max(int(recipe.options.get("steps", 1)), TRY_STEPS)
    if predicted:
        options = recipe.with_options(overrides=dict(overrides))
        gpus = options.pop("gpus", 1)
        return predict.predict_placement(recipe.fn, gpus, args=recipe.args, **options), None
    options = recipe.with_options(steps=steps, overrides=dict(overrides))
    if not options["overrides"]:
        options.pop("overrides")
    trace = tracer.trace_placement(recipe.fn, *recipe.args, **options)
    ran = made(trace, "try_fix")
    return trace, ran.outputs if ran.comparable else None


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
