"""The panel's search and the HTML report's port of it, on one table of cases.

``tests/search_cases.json`` holds names and cases (pattern, regex, case, the names matched or an
error). ``search.match_names`` is checked here; ``_static/search.js``, which the report embeds, by
``tests/js/search.test.mjs`` under node, run from here (skipped without node; the browser test
runs the same cases in Chromium). A case the port answers otherwise today says why
(``known_difference``) and what the port answers (``js_matches``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from helpers import run_python

from tfplace_widget import SearchError
from tfplace_widget._rendering.search import filter_ops, match_names, match_source, searchable

REPO = Path(__file__).resolve().parents[2]
TABLE = json.loads((REPO / "tests" / "search_cases.json").read_text(encoding="utf-8"))
NAMES: list[str] = TABLE["names"]
CASES: list[dict] = TABLE["cases"]
NODE_TESTS = sorted((REPO / "tests" / "js").glob("*.test.mjs"))


def case_id(case: dict) -> str:
    return f"{case['pattern']!r}-{'regex' if case['regex'] else 'text'}-{'case' if case['case'] else 'any'}"


def case_kind(case: dict) -> str:
    if case["regex"]:
        return "regex"
    return "glob" if ("*" in case["pattern"] or "?" in case["pattern"]) else "plain"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_search_py_answers_as_the_table_says(case):
    def search():
        return match_names(
            pd.Series(NAMES), case["pattern"], regex=case["regex"], case=case["case"]
        )

    if case.get("error"):
        with pytest.raises(SearchError) as raised:
            search()
        message = str(raised.value)
        assert message.startswith(f"Invalid regular expression {case['pattern']!r}: ")
        assert message.endswith("untick 'regex' to search for the text as typed.")
        return
    got = [name for name, hit in zip(NAMES, search(), strict=True) if hit]
    assert got == case["matches"]


def test_the_table_covers_every_rule_and_says_why_the_port_differs():
    """Each kind of case matches several different numbers of names, so agreeing means
    something; the bad patterns are there; a known difference names the port's answer."""
    counts: dict[str, set[int]] = {"plain": set(), "glob": set(), "regex": set()}
    for case in CASES:
        if not case.get("error"):
            counts[case_kind(case)].add(len(case["matches"]))
    assert all(len(seen) >= 4 for seen in counts.values()), counts
    assert sum(bool(case.get("error")) for case in CASES) == 6
    for case in CASES:
        if "known_difference" in case:
            assert case["known_difference"] and case["js_matches"] != case["matches"], case
        else:
            assert "js_matches" not in case, case
    assert len({(c["pattern"], c["regex"], c["case"]) for c in CASES}) == len(CASES)


def test_the_reports_search_answers_as_the_table_says_under_node():
    """``node --test tests/js/``: the port, loaded from the file the report embeds."""
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed: the browser test runs the same cases in Chromium")
    assert NODE_TESTS, "no tests/js/*.test.mjs"
    done = subprocess.run(
        [node, "--test", *map(str, NODE_TESTS)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    passed = re.search(r"^# pass (\d+)$", done.stdout, re.M)
    assert passed and int(passed.group(1)) > len(CASES), done.stdout[-2000:]  # every case ran


@pytest.mark.parametrize("case", [c for c in CASES if not c.get("error")], ids=case_id)
def test_search_py_answers_the_same_on_the_names_lowered_once(case):
    """The panel passes ``searchable(names)`` (a fixed-width numpy array, or a Series for long
    names): a glob or a substring without ``match case`` searches it, with the same answer."""
    names = pd.Series(NAMES)
    for lowered in (searchable(names), names.str.lower()):
        mask = match_names(
            names, case["pattern"], regex=case["regex"], case=case["case"], lowered=lowered
        )
        assert [name for name, hit in zip(NAMES, mask, strict=True) if hit] == case["matches"]


# One op name of 10,000 characters, and globs of several stars that do not match it (every way
# of cutting it at the stars is tried by a backtracking matcher: minutes) and that do.
LONG_GLOBS = {"*/*/*/MatMul": False, "*/*/*/a*/": True, "*a/?/*/*/": True, "*/*/*/b*/": False}
LONG_CHECK = f"""
import pandas as pd
from tfplace_widget._rendering.search import match_names
name = pd.Series(["a/" * 5000])
print([bool(match_names(name, glob)[0]) for glob in {list(LONG_GLOBS)!r}])
"""


def test_globs_of_several_stars_match_a_long_name_in_linear_time():
    """Issue 31: ``*/*/*/MatMul`` on one 10,000-character op name (a 4 KB file) did not finish
    in minutes; in a child process bounded in time, as a backtracking regex holds the GIL."""
    done = run_python(LONG_CHECK, timeout=60)  # TimeoutExpired: the backtracking of issue 31
    assert done.stdout.split("\n")[0] == str(list(LONG_GLOBS.values()))


@pytest.mark.parametrize("case", TABLE["source_cases"], ids=lambda c: f"{c['text']!r}-{c['case']}")
def test_a_line_of_the_users_code_finds_the_ops_it_made(case):
    """``train.py:42`` (``search.match_source``) finds the ops that line made, and ``filter_ops``
    (the panel's and ``tfplace show``'s search) adds them to the ops whose name matches."""
    paths = pd.Series(TABLE["source_paths"], dtype="string")
    got = match_source(paths, case["text"], case=case["case"])
    assert [i for i, hit in enumerate(got) if hit] == case["matches"]
    ops = pd.DataFrame({"op": [f"op{i}" for i in range(len(paths))], "source_path": paths})
    mask = filter_ops(ops, case["text"], case=case["case"])
    assert [i for i, hit in enumerate(mask) if hit] == (
        case["matches"] if case["text"] else list(range(len(paths)))
    )


def test_a_glob_over_the_panels_lowered_names_runs_in_numpy_not_once_per_name(monkeypatch):
    """A million names (ten traced steps of a large model) must answer a keystroke in well
    under 100 ms: a glob without ``?`` over ``searchable``'s numpy array runs in numpy's string
    loops, with no ``re`` call per name, and answers as the pattern does (the table's cases,
    above, check each answer)."""
    from tfplace_widget._rendering import search

    calls = []
    real = search.compile_glob

    class Counting:
        def __init__(self, pattern: re.Pattern) -> None:
            self.pattern = pattern

        def match(self, name: str):
            calls.append(name)
            return self.pattern.match(name)

    monkeypatch.setattr(search, "compile_glob", lambda text: Counting(real(text)))
    names = pd.Series([f"c{i % 16}/add{i}" for i in range(2000)] + ["C7/Mul", "x/c7/add"])
    lowered = searchable(names)
    for glob in ("c7*", "c7/*1", "*/add1*", "c*/add*9", "*c7*"):
        mask = match_names(names, glob, lowered=lowered)
        expected = [bool(real(glob).match(name.lower())) for name in names]
        assert mask.tolist() == expected, glob
        assert 0 < mask.sum() < len(names), glob
    assert calls == []
    # with a ?, it is the pattern's, name by name (numpy has no one-character wildcard)
    match_names(names, "c7/add?", lowered=lowered)
    assert len(calls) == len(names)
