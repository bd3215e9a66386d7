"""The panel's search over ``searchable``'s index (each distinct name matched once, a regex's
``re`` calls only on the names holding a text its matches contain) answers as the plain
pandas and fnmatch searches do, name by name, on tricky patterns (issue 35)."""

from __future__ import annotations

import fnmatch
import re
import warnings

import numpy as np
import pandas as pd
import pytest

from tfplace_widget import SearchError
from tfplace_widget._rendering import search
from tfplace_widget._rendering.search import (
    anchored_width,
    exact_texts,
    match_names,
    required_texts,
    searchable,
)

# ASCII op names (the prefilter's case), each on several rows, as an op on several devices or
# a name on both sides of a diff, and names with regex and glob characters in them.
ASCII_NAMES = [
    "model/dense_1/MatMul",
    "model/dense_12/MatMul",
    "model/dense_12/BiasAdd",
    "Model/Dense_3/matmul",
    "model/conv2d/Conv2D",
    "model/CONV2D_1/Relu",
    "gradient_tape/model/dense_1/MatMul_1",
    "a.b",
    "axb",
    "a*b",
    "x[1]",
    "x1",
    "aab",
    "c7/add123",
    "c7/add1",
    "",
]
# Non-ASCII names: a case-insensitive regex matches the long s and the Kelvin sign as s and k,
# which lower() does not say (no prefilter then).
OTHER_NAMES = ["ſtep", "STEP", "K", "k", "Ünïcode/ÄDD", "straße"]
# A name of two lines: ``$`` also matches before its newline.
LINES_NAMES = ["MatMul\n", "MatMul\nx", "x\nMatMul", "a"]

REGEXES = [
    r"^model/",
    r"MatMul$",
    r"\Amodel/dense_1\Z",
    r"dense_1\d/MatMul$",
    r"dense_1\d?/",
    r"[Mm]at[Mm]ul",
    r"[^/]+$",
    r"dense_[0-9]+/",
    r"a\.b",
    r"a.b",
    r"x\[1\]",
    r"(MatMul|Conv2D)$",
    r"^model/(dense|conv2d)_?\d*/",
    r"(?i)MATMUL",
    r"(?-i:MatMul)",
    r"(?i:DENSE)_12",
    r"(?x) Mat Mul",
    r"dense(?=_1)",
    r"(?<=model/)dense",
    r"(?<!tape/)model/dense_1/",
    r"(a)\1b",
    r"c7/add1\d+$",
    r"c7/add1$",
    r"MatMul\Z",
    r"^MatMul$",
    r"^(a|)$",
    r"MatMul\0",
    r"d1\0$",
    r"(?m)^MatMul$",
    r"^",
    r"$",
    r"matmul_1",
    r"nothing_matches_this",
    r"step",
    r"k",
    r"\d+",
    r"",
    r"\d{3}$",  # anchored, of bounded width: re once per distinct window of the name's end
    r"^c[0-3]/",
    r"[a-z]\d{0,2}\Z",
    r"^\w{5}(/|_)",
    r"(?i:mat)[^/]{3}$",
    r"^(a|b|)b$",
    r"^.{1,4}$",
    r"\b\d$",  # context (\b, lookarounds, back-references): re on each name
    r"(?<=/)\w{3}$",
    r"^x(?=\[)",
    r"(a)\1b$",
]
TEXTS = ["dense_1", "MATMUL", "a.b", "x[1]", "nothing_matches_this", "step", ""]
GLOBS = ["model/*", "*MatMul", "*/dense_1?/*", "a?b", "x[1]", "*[1]", "c7/add1*", "*nothing*", "*"]


def names_frame(names: list[str], dtype: object, repeats: int) -> pd.Series:
    return pd.Series([names[i % len(names)] for i in range(len(names) * repeats)], dtype=dtype)


def expected(names: pd.Series, text: str, *, regex: bool, case: bool) -> list[bool]:
    """The answer of the plain searches, name by name (the module's rules: a glob matches the
    whole name, ``[`` and ``]`` literal; text and glob lower-case without ``case``)."""
    values = names.astype(object).tolist()
    if not text:
        return [True] * len(values)
    if regex:
        pattern = re.compile(text, 0 if case else re.IGNORECASE)
        with warnings.catch_warnings():  # the patterns' groups: pandas warns
            warnings.simplefilter("ignore", UserWarning)
            return pd.Series(values, dtype=object).str.contains(pattern, regex=True).tolist()
    fold = (lambda s: s) if case else str.lower
    if "*" in text or "?" in text:
        glob = fold(text).replace("[", "[[]")
        return [fnmatch.fnmatchcase(fold(v), glob) for v in values]
    return [fold(text) in fold(v) for v in values]


@pytest.mark.parametrize("repeats", [1, 3], ids=["distinct", "repeated"])
@pytest.mark.parametrize("dtype", [object, "string", "category"])
@pytest.mark.parametrize(
    "names",
    [ASCII_NAMES, ASCII_NAMES + OTHER_NAMES, ASCII_NAMES + LINES_NAMES],
    ids=["ascii", "other", "lines"],
)
def test_the_index_answers_as_pandas_and_fnmatch_name_by_name(names, dtype, repeats):
    column = names_frame(names, dtype, repeats)
    index = searchable(column)
    queries = [(p, True) for p in REGEXES] + [(t, False) for t in TEXTS + GLOBS]
    for text, regex in queries:
        for case in (False, True):
            got = match_names(column, text, regex=regex, case=case, lowered=index)
            assert got.dtype == bool and len(got) == len(column)
            want = expected(column, text, regex=regex, case=case)
            assert got.tolist() == want, (text, regex, case)
            plain = match_names(column, text, regex=regex, case=case)  # no index: name by name
            assert plain.tolist() == want, (text, regex, case)


class CountingRe:
    """A compiled pattern that notes each name ``re`` is asked to search."""

    def __init__(self, pattern: re.Pattern, calls: list[str]) -> None:
        self.pattern, self.flags = pattern.pattern, pattern.flags
        self.compiled, self.calls = pattern, calls

    def search(self, name: str):
        self.calls.append(name)
        return self.compiled.search(name)


def test_a_regex_runs_re_once_per_distinct_name_that_holds_its_text(monkeypatch):
    """2,000 rows of 200 distinct names: ``c7/add1\\d+$`` calls ``re`` on the 7 distinct names
    holding ``c7/add1`` only (on today's main: a call per row, through pandas)."""
    calls: list[str] = []
    real = search.compile_query
    monkeypatch.setattr(search, "compile_query", lambda *a, **k: CountingRe(real(*a, **k), calls))
    distinct = [f"c{i % 16}/add{i}" for i in range(200)]
    names = pd.Series(distinct * 10, dtype=object)
    want = [bool(re.search(r"c7/add1\d+$", n, re.IGNORECASE)) for n in names]
    got = match_names(names, r"c7/add1\d+$", regex=True, lowered=searchable(names))
    assert got.tolist() == want and sum(want) == 10 * 7  # c7/add103, 119, ... 199
    holding = sorted({n for n in distinct if "c7/add1" in n})
    assert sorted(calls) == holding


def test_an_anchored_regex_without_text_runs_re_once_per_distinct_window(monkeypatch):
    """``\\d{3}$`` has no text to look for first: it calls ``re`` once per distinct last three
    characters of the names (``123`` of ``c7/add123``), ``^c[0-3]/`` once per distinct first
    three (on today's main: once per distinct name), with the same answer."""
    real = search.compile_query
    calls: list[str] = []
    monkeypatch.setattr(search, "compile_query", lambda *a, **k: CountingRe(real(*a, **k), calls))
    distinct = [f"c{i % 16}/add{i}" for i in range(5000)]
    names = pd.Series(distinct * 2, dtype=object)
    index = searchable(names)
    for pattern, window in ((r"\d{3}$", lambda n: n[-3:]), (r"^c[0-3]/", lambda n: n[:3])):
        calls.clear()
        got = match_names(names, pattern, regex=True, lowered=index)
        assert got.tolist() == [bool(re.search(pattern, n, re.IGNORECASE)) for n in names]
        assert sorted(calls) == sorted({window(n) for n in distinct})
        assert len(calls) < len(distinct) // 2


@pytest.mark.parametrize(
    ("pattern", "answer"),
    [
        (r"\d{3}$", ("end", 3, 3)),
        (r"^c[0-3]/", ("start", 3, 3)),
        (r"\A(ab|c)?x{1,2}\Z", ("whole", 1, 4)),
        (r"^", ("start", 0, 0)),
        (r"\d+$", None),  # unbounded
        (r"add\d", None),  # not anchored
        (r"\b\d{3}$", None),  # what is before the match counts
        (r"^a(?=b)", None),
        (r"(a)\1$", None),
        (r"^a|b$", None),
    ],
)
def test_which_regexes_a_window_answers(pattern, answer):
    assert anchored_width(re.compile(pattern, re.IGNORECASE)) == answer


@pytest.mark.parametrize(
    ("pattern", "flags", "answer"),
    [
        (r"MatMul$", re.IGNORECASE, ("end", ["matmul"])),
        (r"^model/block_(3|7)/", re.IGNORECASE, ("start", ["model/block_3/", "model/block_7/"])),
        (r"\Aa\Z", re.IGNORECASE, ("whole", ["a"])),
        (r"^$", re.IGNORECASE, ("whole", [""])),
        (r"(?i)x\[1\]", 0, ("in", ["x[1]"])),
        (r"(MatMul|conv2D)$", 0, ("end", ["MatMul", "conv2D"])),  # match case
        (r"(?m)^a", re.IGNORECASE, None),
        (r"(?-i:Mat)", re.IGNORECASE, None),
        (r"a(?=b)", re.IGNORECASE, None),
        (r"a\b", re.IGNORECASE, None),
        (r"[ab]\d", re.IGNORECASE, None),
    ],
)
def test_the_regexes_numpy_answers_alone(pattern, flags, answer):
    assert exact_texts(re.compile(pattern, flags)) == answer


def test_a_regex_of_a_few_anchored_texts_calls_no_re(monkeypatch):
    """``(MatMul|Conv2D)$`` is two ``endswith`` over the lower-cased names (with match case,
    then over the cased names of those that end so)."""
    calls: list[str] = []
    real = search.compile_query
    monkeypatch.setattr(search, "compile_query", lambda *a, **k: CountingRe(real(*a, **k), calls))
    names = pd.Series(ASCII_NAMES * 4, dtype=object)
    index = searchable(names)
    for case, flags in ((False, re.IGNORECASE), (True, 0)):
        got = match_names(names, r"(MatMul|Conv2D)$", regex=True, case=case, lowered=index)
        want = [bool(re.search(r"(MatMul|Conv2D)$", n, flags)) for n in names]
        assert got.tolist() == want and any(want)
    assert not all(got == match_names(names, r"(MatMul|Conv2D)$", regex=True, lowered=index))
    assert calls == []


@pytest.mark.parametrize(
    ("pattern", "needs"),
    [
        (r"c7/add1\d+$", [["c7/add1"]]),
        (r"(MatMul|Conv2D)$", [["conv2d", "matmul"]]),
        (r"^model/block_(3|7)/", [["model/block_3/", "model/block_7/"]]),
        (r"(?i)ABC", [["abc"]]),
        (r"x(?=y)z", [["xz"]]),
        (r"\d+", []),
        (r"a|b", []),  # one character: not worth a scan
        (r"[^a]bc", [["bc"]]),
        (r"(a|)bc", [["abc", "bc"]]),
        (r"(a)\1bc", [["bc"]]),
        (r"é+xy", [["xy"]]),
        (r"éé", []),
        (r"x*yz", [["yz"]]),
    ],
)
def test_the_texts_every_match_holds(pattern, needs):
    assert required_texts(re.compile(pattern)) == needs


@pytest.mark.parametrize("bad", ["(", "[a-", "a**", "(?P<x>a)(?P<x>b)", "\\"])
def test_a_bad_regex_is_the_same_clear_error_with_the_index(bad):
    names = pd.Series(ASCII_NAMES * 2, dtype=object)
    with pytest.raises(SearchError) as plain:
        match_names(names, bad, regex=True)
    with pytest.raises(SearchError) as indexed:
        match_names(names, bad, regex=True, lowered=searchable(names))
    assert str(indexed.value) == str(plain.value)
    assert str(indexed.value).startswith(f"Invalid regular expression {bad!r}: ")
    assert str(indexed.value).endswith("untick 'regex' to search for the text as typed.")


def test_an_empty_column_and_an_empty_search():
    empty = pd.Series([], dtype=object)
    index = searchable(empty)
    for text, regex in (("", False), ("a", False), ("a*", False), ("a.", True)):
        assert match_names(empty, text, regex=regex, lowered=index).tolist() == []
    names = pd.Series(["a", "a", "b"], dtype=object)
    assert np.array_equal(match_names(names, "", lowered=searchable(names)), [True] * 3)


def test_a_column_with_a_missing_name_is_searched_as_before():
    """A name missing (not an op's: a column of another frame) leaves the index to the search
    row by row over the lower-cased names, as the panel searched before the index."""
    names = pd.Series(["MatMul", None, "x", "MatMul", np.nan], dtype=object)
    index = searchable(names)
    before = names.str.lower().to_numpy(dtype="<U6")  # what searchable() returned then
    for text, regex in (("mat", True), ("MatMul$", True), (r"\d", True), ("mat", False)):
        plain = match_names(names, text, regex=regex, lowered=before)
        assert match_names(names, text, regex=regex, lowered=index).tolist() == plain.tolist()


def test_a_regex_over_names_with_a_nul_answers_as_re():
    """A fixed-width numpy string drops trailing NULs, in a name and in a searched text: a
    regex holding one, or names ending with one, are matched by ``re``."""
    names = pd.Series(["MatMul", "MatMul\0", "c7/add1\0", "c7/add12"] * 2, dtype=object)
    for pattern in (r"MatMul\0", r"MatMul$", r"^MatMul", r"d1\0$", r"c7/add1\d*$", r"(?-i:Mat)"):
        for case in (False, True):
            want = [bool(re.search(pattern, n, 0 if case else re.IGNORECASE)) for n in names]
            got = match_names(names, pattern, regex=True, case=case, lowered=searchable(names))
            assert got.tolist() == want, (pattern, case)
    ascii_names = pd.Series(["MatMul", "MatMul_1"] * 2, dtype=object)
    got = match_names(ascii_names, r"MatMul\0", regex=True, lowered=searchable(ascii_names))
    assert not got.any()


def test_a_text_is_found_in_one_name_only_never_across_two():
    """Text is found in the names' bytes, a row per place in a name: ``bc`` is not in ``ab``
    followed by ``cd``, nor ``7`` in a name that ends before it; as typed with match case;
    a text longer than every name, or whose first letter most names repeat (``aab``)."""
    names = pd.Series(["ab", "cd", "", "xAbC7", "abc", "7", "aaaaab"] * 2, dtype=object)
    index = searchable(names)
    for text in ("bc", "7", "ABC", "c7", "b", "abcd", "dx", "aab", "abcdefghijk"):
        for case in (False, True):
            got = match_names(names, text, case=case, lowered=index)
            want = [(text in n) if case else (text.lower() in n.lower()) for n in names]
            assert got.tolist() == want, (text, case)
