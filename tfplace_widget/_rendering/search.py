"""Search and filters over ``trace.ops``: vectorised pandas, no widget code.

The panel calls :func:`match_names` on every keystroke, so it must stay cheap on 100,000 ops:
plain text is a case-insensitive substring test; a ``*`` or ``?`` makes it a shell glob, which
matches the whole name as :func:`fnmatch.fnmatch` does (``A*`` is the names that start with an
a; ``[`` and ``]`` stay literal); the regex toggle passes the text to ``re``. Without ``match
case`` text and glob compare the lower-cased names (:func:`searchable`). A bad regex raises
:class:`SearchError` with a readable message. The globs of ``overrides=``
(``_tracing/overrides.py``) and ``tfplace --expect-device`` (``cli.py``) match the whole name too,
with :mod:`fnmatch`, but case-sensitively and with ``[...]`` classes: they name the ops to move or
check (``A*`` must not move ``add``), where a search looks for ops as typed.
The HTML report runs these rules ported by hand (``_static/search.js``): a change here goes
there too, with its case in ``tests/search_cases.json``, which both are tested on.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable

import numpy as np
import pandas as pd

from .._model.errors import SearchError

try:  # re's own parser (Python 3.11+), to find the text every match of a regex contains
    from re import _constants as _sre_constants
    from re import _parser as _sre_parser
except ImportError:  # Python 3.10
    import sre_constants as _sre_constants  # type: ignore[no-redef]
    import sre_parse as _sre_parser  # type: ignore[no-redef]

# What the search box says, in the panel and in the HTML report: a placeholder and its tooltip.
SEARCH_PLACEHOLDER = "search op names: text, glob (A*), or regex"
SEARCH_HELP = (
    "Plain text: any part of an op name. With * or ?: a shell glob over the whole name "
    "(A* starts with A, */add_1 ends with /add_1; * crosses /). Any case unless 'match case'. "
    "Tick 'regex' for a regular expression (it matches anywhere unless anchored: ^ and $). "
    "A line of your code, train.py:42, finds the ops it made."
)


# A search for a line of the user's code (``train.py:42``, ``models/net.py:7``): it also finds
# the ops whose ``source_path`` is that file (its name or its path's tail) and line.
_SOURCE_QUERY = re.compile(r"^[^\s*?:]+\.[A-Za-z0-9_]+:\d+$")


def compile_query(text: str, *, regex: bool = False, case: bool = False) -> re.Pattern | None:
    """A compiled pattern for ``text``, or ``None`` when a plain substring test will do (a
    glob's, without ``case``, is for the lower-cased names: :func:`compile_glob`)."""
    if regex:
        try:
            return re.compile(text, 0 if case else re.IGNORECASE)
        except re.error as exc:
            raise SearchError(
                f"Invalid regular expression {text!r}: {exc}. Fix it, or untick 'regex' to "
                "search for the text as typed."
            ) from exc
    if is_glob(text):
        return compile_glob(text if case else text.lower())
    return None


def is_glob(text: str) -> bool:
    """Whether the search text (regex off) is a glob: it has a ``*`` or a ``?``."""
    return "*" in text or "?" in text


def compile_glob(text: str) -> re.Pattern:
    """The glob ``text`` as a pattern that matches a whole name (``search`` it, or ``match``):
    ``*`` any run of characters, ``?`` one character (a newline too, as in :mod:`fnmatch`),
    everything else itself, ``[`` and ``]`` included. Case-sensitive: without ``match case``
    the caller lower-cases the text and the names, as for a substring.

    Matching takes time linear in the name (times the glob's length), however many ``*``: not
    ``.*`` per star, which backtracks (``*/*/*/MatMul`` on a name of 10,000 characters took
    minutes), but each run between two stars matched where it first occurs, which is where a
    match, if any, can take it: ``(?:(?!run).)*run`` cannot pass that place, nor give it up.
    """
    *runs, last = (_glob_run(part) for part in text.split("*"))
    if not runs:  # no star
        return re.compile(rf"\A(?:{last})\Z", re.DOTALL)
    first, middle = runs[0], [run for run in runs[1:] if run]
    body = first + "".join(f"(?:(?!{run}).)*{run}" for run in middle) + f".*{last}"
    return re.compile(rf"\A(?:{body})\Z", re.DOTALL)


def glob_mask(names: np.ndarray, glob: str) -> np.ndarray:
    """Which of ``names`` (a numpy string array) the glob ``glob`` (``*``, no ``?``) matches,
    as :func:`compile_glob`'s pattern does, in numpy's C string loops instead of one ``re``
    call per name (a million names: tens of milliseconds, not a second): the text before the
    first star starts the name, each run between two stars is found where it first occurs
    after the previous one, and the text after the last star ends the name, after them."""
    *runs, last = glob.split("*")
    if not runs:
        return names == glob
    first = runs[0]
    mask = np.char.startswith(names, first) if first else np.ones(len(names), dtype=bool)
    at = np.full(len(names), len(first), dtype=np.int64)
    for run in (run for run in runs[1:] if run):
        found = np.char.find(names, run, at)
        mask &= found >= 0
        at = found + len(run)
    if last:
        mask &= np.char.endswith(names, last)
    return mask & (np.char.str_len(names) - len(last) >= at)


def _glob_run(part: str) -> str:
    """A glob's text between two stars as a pattern: ``?`` any one character, the rest itself."""
    return "".join("." if char == "?" else re.escape(char) for char in part)


def match_names(
    names: pd.Series,
    text: str,
    *,
    regex: bool = False,
    case: bool = False,
    lowered: SearchIndex | pd.Series | np.ndarray | None = None,
) -> np.ndarray:
    """Boolean mask of ``names`` matching ``text`` (all True for empty text).

    ``lowered`` is what callers that search many times precompute: :func:`searchable`'s
    :class:`SearchIndex` of ``names`` (each distinct name matched once), or the lower-cased
    names (as a fixed-width numpy string array a substring test runs in C).
    """
    if not text:
        return np.ones(len(names), dtype=bool)
    if not isinstance(lowered, SearchIndex):
        return _match_each(names, text, regex, case, lowered)
    if not lowered.strings:
        return _match_each(names, text, regex, case, lowered.rows)
    if regex:
        distinct = lowered.regex_mask(compile_query(text, regex=True, case=case))
    else:
        distinct = None if is_glob(text) else lowered.holds(text, case)
        if distinct is None:
            distinct = _match_each(lowered.names, text, regex, case, lowered.lowered)
    return distinct if lowered.codes is None else distinct[lowered.codes]


def _match_each(
    names: pd.Series, text: str, regex: bool, case: bool, lowered: pd.Series | np.ndarray | None
) -> np.ndarray:
    """:func:`match_names` name by name (``text`` not empty)."""
    pattern = compile_query(text, regex=regex, case=case)
    if pattern is not None and not regex:  # a glob: the whole name, lower-cased without case
        haystack = names if case else (lowered if lowered is not None else names.str.lower())
        if isinstance(haystack, np.ndarray) and "?" not in text:
            return glob_mask(haystack, text if case else text.lower())
        values = haystack.tolist()
        return np.fromiter(map(bool, map(pattern.match, values)), dtype=bool, count=len(values))
    if pattern is None:
        if case:
            return names.str.contains(text, regex=False).to_numpy(dtype=bool)
        haystack = lowered if lowered is not None else names.str.lower()
        if isinstance(haystack, np.ndarray):
            return np.char.find(haystack, text.lower()) >= 0
        return haystack.str.contains(text.lower(), regex=False).to_numpy(dtype=bool)
    with warnings.catch_warnings():  # groups in the user's regex: pandas warns, we only match
        warnings.filterwarnings("ignore", "This pattern is interpreted as a regular expression")
        return names.str.contains(pattern, regex=True).to_numpy(dtype=bool)


MAX_FIXED_WIDTH = 160  # longer names make a fixed-width array too big: stay with pandas


class SearchIndex:
    """A column of names made ready for many searches (the panel's, one per keystroke).

    It holds the column's distinct names once (an op on several devices, a diff's two sides
    and log lines repeat a name), each row's code among them, and the distinct names
    lower-cased in the fastest form to search: a fixed-width numpy array, or a Series for
    names over ``MAX_FIXED_WIDTH``. A search matches each distinct name once and maps the
    answer to the rows with one numpy take.

    A regex is matched by ``re``, one call per distinct name, but only on the names that hold
    a text every match contains (``c7/add1`` of ``c7/add1\\d+$``, :func:`required_texts`),
    found first in numpy's C string loops: the same answer, as a name without it cannot match.
    """

    def __init__(self, names: pd.Series) -> None:
        try:
            text = "".join(names.tolist())
        except TypeError:  # a missing name (None, NaN)
            text = None
        # Names all text, and no NUL in one (pandas 2's factorize takes "a" and "a\0" for one
        # name); else the column is searched row by row, as it was before the index.
        self.strings = text is not None and "\0" not in text
        if not self.strings:
            self.codes: np.ndarray | None = None
            self.names = pd.Series(names.to_numpy(dtype=object), dtype=object)
            self.rows = self.lowered = _lowered(names)
            self.ascii = self.one_line = False
            self._bytes = self._lengths = self._offsets = self._columns = None
            return
        codes, uniques = pd.factorize(names, use_na_sentinel=False)
        # each row's distinct name; None: every row its own (codes in order of first sight)
        self.codes = codes if len(uniques) < len(codes) else None
        values = np.asarray(uniques, dtype=object)
        self.names = pd.Series(values, dtype=object)
        self.rows = None
        self.lowered = _lowered_text(values)
        # The prefilter needs lower() to keep each character in its place and re's
        # case-insensitive match of a letter to be ASCII's: ASCII names (TF's op names are).
        # ``$`` also matches before a name's last newline: numpy answers for names without.
        self.ascii = isinstance(self.lowered, np.ndarray) and text.isascii()
        self.one_line = self.ascii and "\n" not in text
        # each place in a name a row of bytes (the lower-cased names'; the cased, if asked):
        # what holds() reads; the names' bytes end to end, each one's length and start, made
        # for the first anchored regex (_window_mask)
        self._bytes = self._lengths = self._offsets = self._columns = self._lower_columns = None
        if self.ascii:
            self._lower_columns = _columns(self.lowered)

    def holds(self, text: str, case: bool) -> np.ndarray | None:
        """Which distinct names hold ``text`` (lower-cased, both, without ``case``): numpy
        compares over the names' characters as bytes, one row per place in the name (a
        character's row is contiguous: a pass reads each name's byte once); ``None`` where
        that cannot say (names not ASCII, ``text`` not ASCII or with a NUL) or would be slower
        than ``np.char.find`` (a text whose first character is in most names more than once)."""
        if self._lower_columns is None or not _plain(text):
            return None
        if case and self._columns is None:  # the cased names, on the first such search
            self._columns = _columns(np.array(self.names.to_numpy(), dtype=self.lowered.dtype))
        chars = self._columns if case else self._lower_columns
        needle = (text if case else text.lower()).encode("ascii")
        if len(needle) > chars.shape[0]:  # longer than every name
            return np.zeros(chars.shape[1], dtype=bool)
        places = chars.shape[0] - len(needle) + 1  # where it can start (bytes end in NULs)
        sample = chars[:places, :4096] == needle[0]
        if len(needle) > 1 and np.count_nonzero(sample) > sample.shape[1]:
            return None  # its first byte many times in a name: following each is slower
        first = chars[:places] == needle[0]
        if len(needle) == 1:
            return first.any(axis=0)
        found = np.zeros(chars.shape[1], dtype=bool)
        for start in range(len(first)):
            at = np.flatnonzero(first[start])  # then the text's next bytes, where it starts
            for i in range(1, len(needle)):
                at = at[chars[start + i, at] == needle[i]]
            found[at] = True
        return found

    def _find(self, lowered: np.ndarray, text: str, every: bool) -> np.ndarray:
        """Which of ``lowered`` (every distinct name's, or some) hold ``text``."""
        found = self.holds(text, case=False) if every else None
        return np.char.find(lowered, text) >= 0 if found is None else found

    def regex_mask(self, pattern: re.Pattern) -> np.ndarray:
        """Which distinct names the compiled regex ``pattern`` finds anything in."""
        whole = exact_texts(pattern) if self.one_line else None
        if whole is not None:  # a few texts, maybe anchored: numpy alone answers
            where, texts = whole
            holds = _holding(self.lowered, where, [t.lower() for t in texts])
            if pattern.flags & re.IGNORECASE:
                return holds
            maybe = np.flatnonzero(holds)  # then the same texts, as cased, in their names
            names = self.names.to_numpy()[maybe].astype(str)
            holds[maybe] = _holding(names, where, texts)
            return holds
        maybe, lowered = slice(None), self.lowered  # every name, until a text leaves fewer
        for i, texts in enumerate(required_texts(pattern) if self.ascii else []):
            # the fewest, longest texts first: on all names, then on those the last one left
            holds = np.logical_or.reduce([self._find(lowered, t, i == 0) for t in texts])
            maybe = np.flatnonzero(holds) if i == 0 else maybe[holds]
            lowered = self.lowered[maybe]
        mask = np.zeros(len(self.names), dtype=bool)
        window = anchored_width(pattern) if self.one_line else None
        if window is not None and window[2] < self.lowered.dtype.itemsize // 4:
            mask[maybe] = self._window_mask(pattern, maybe, *window)
            return mask
        mask[maybe] = _searched(pattern, self.names.to_numpy()[maybe])
        return mask

    def _window_mask(
        self,
        pattern: re.Pattern,
        maybe: np.ndarray | slice,
        where: str,
        shortest: int,
        longest: int,
    ) -> np.ndarray:
        """Which names of ``maybe`` an anchored ``pattern`` of bounded width
        (:func:`anchored_width`) finds anything in: ``re`` runs once per distinct window of
        ``longest`` characters at the anchored end (``\\d{3}$`` on ``c7/add123``: ``123``),
        read by numpy from the names' bytes; a whole-name pattern only on names of a length
        it can match."""
        if self._bytes is None:  # each name and a NUL, NULs to read past the last: once
            ended = "\0".join(self.names) + "\0" * (MAX_WINDOW + 1)
            self._bytes = np.frombuffer(ended.encode("ascii"), dtype=np.uint8)
            self._lengths = np.char.str_len(self.lowered).astype(np.int32)
            self._offsets = (
                np.cumsum(self._lengths + 1, dtype=np.int64) - self._lengths - 1
            ).astype(np.int32 if len(self._bytes) < 2**31 else np.int64)
        lengths, values = self._lengths[maybe], self.names.to_numpy()[maybe]
        if where == "whole":
            fits = np.flatnonzero((lengths >= shortest) & (lengths <= longest))
            found = np.zeros(len(lengths), dtype=bool)
            found[fits] = _searched(pattern, values[fits])
            return found
        span = np.minimum(lengths, longest)  # each window's length
        starts = lengths - span if where == "end" else np.zeros(len(lengths), dtype=np.int64)
        begins = self._offsets[maybe] + starts
        codes, firsts = _distinct_windows(self._bytes, begins, longest)
        windows = [
            value[start : start + longest]
            for value, start in zip(values[firsts], starts[firsts], strict=True)
        ]
        return _searched(pattern, np.array(windows, dtype=object))[codes]


def _columns(names: np.ndarray) -> np.ndarray:
    """ASCII names (a fixed-width numpy string array) as bytes, a row per place in a name (NUL
    past its end): each row contiguous, for one pass over each name's byte there."""
    width = names.dtype.itemsize // 4
    codes = names.view(np.uint32).reshape(len(names), width)
    columns = np.empty((width, len(names)), dtype=np.uint8)
    for start in range(0, len(names), 4096):  # in blocks that stay in the cache
        columns[:, start : start + 4096] = codes[start : start + 4096].T
    return columns


def _searched(pattern: re.Pattern, values: np.ndarray) -> np.ndarray:
    """Whether ``pattern`` finds anything in each of ``values``, one ``re`` call each."""
    found = (pattern.search(value) is not None for value in values)
    return np.fromiter(found, dtype=bool, count=len(values))


def _distinct_windows(
    text: np.ndarray, begins: np.ndarray, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """Each window's code among the distinct windows of the bytes ``text`` (window ``i``: the
    ``width`` bytes from ``begins[i]``; names end in a NUL, which holds in none: two windows
    with the same bytes are the same text up to their first NUL), and each distinct window's
    first window: its bytes eight at a time as integers, factorized."""
    codes = np.zeros(len(begins), dtype=np.int64)  # the windows' codes, by their bytes so far
    block = np.zeros((len(begins), 8), dtype=np.uint8)  # eight of each window's bytes
    for chunk in range(0, max(width, 1), 8):
        block[:] = 0
        for k in range(chunk, min(chunk + 8, width)):
            block[:, k - chunk] = text.take(begins + k)
        word_codes, uniques = pd.factorize(block.view(np.uint64).ravel())
        codes = word_codes if chunk == 0 else pd.factorize(codes * len(uniques) + word_codes)[0]
    firsts = np.zeros(codes.max() + 1 if len(codes) else 0, dtype=np.int64)
    firsts[codes[::-1]] = np.arange(len(codes))[::-1]
    return codes, firsts


_FREE = {  # items whose match depends on the text they consume alone, not on what is around it
    getattr(_sre_constants, name)
    for name in [
        "LITERAL",
        "NOT_LITERAL",
        "ANY",
        "IN",
        "MAX_REPEAT",
        "MIN_REPEAT",
        "POSSESSIVE_REPEAT",
        "SUBPATTERN",
        "ATOMIC_GROUP",
        "BRANCH",
    ]
    if hasattr(_sre_constants, name)
}
MAX_WINDOW = 64  # a wider anchored regex: re on each name, as before


def anchored_width(pattern: re.Pattern) -> tuple[str, int, int] | None:
    """For a ``pattern`` anchored at the name's start (``^c[0-3]/``), its end (``\\d{3}$``) or
    both, whose every match is at most ``MAX_WINDOW`` characters long and depends on the
    characters it consumes alone (no other anchor, lookaround, ``\\b`` or back-reference):
    where (``"start"``, ``"end"``, ``"whole"``) and the shortest and longest match. On names of
    one line, such a pattern finds a match in a name exactly when it finds one in the name's
    first (start) or last (end) ``longest`` characters; a whole-name one only in a name of a
    length it can match. ``None`` for any other pattern."""
    try:
        parsed = _sre_parser.parse(pattern.pattern, pattern.flags)
        items = list(parsed)
        shortest, longest = parsed.getwidth()
    except Exception:  # noqa: BLE001  (a private parser: then re on each name, the same answer)
        return None
    start = bool(items) and items[0][0] == _sre_constants.AT and items[0][1] in _STARTS
    end = len(items) > start and items[-1][0] == _sre_constants.AT and items[-1][1] in _ENDS
    if not (start or end) or longest > MAX_WINDOW:
        return None
    if not _context_free(items[int(start) : len(items) - int(end)]):
        return None
    return (
        {(True, False): "start", (False, True): "end"}.get((start, end), "whole"),
        shortest,
        longest,
    )


def _context_free(items) -> bool:
    """Whether parsed ``items`` hold only items of ``_FREE`` (at any depth)."""
    for op, value in items:
        if op not in _FREE:
            return False
        if op in (_sre_constants.MAX_REPEAT, _sre_constants.MIN_REPEAT) or (
            op == getattr(_sre_constants, "POSSESSIVE_REPEAT", None)
        ):
            inner = [value[2]]
        elif op == _sre_constants.SUBPATTERN:
            inner = [value[-1]]
        elif op == _sre_constants.BRANCH:
            inner = value[1]
        elif op == getattr(_sre_constants, "ATOMIC_GROUP", None):
            inner = [value]
        else:
            continue
        if not all(_context_free(sub) for sub in inner):
            return False
    return True


def _holding(names: np.ndarray, where: str, texts: list[str]) -> np.ndarray:
    """Which of ``names`` hold one of ``texts`` (``where``: anywhere, at the start, the end, or
    as the whole name)."""
    test = {
        "in": lambda t: np.char.find(names, t) >= 0,
        "start": lambda t: np.char.startswith(names, t),
        "end": lambda t: np.char.endswith(names, t),
        "whole": lambda t: names == t,
    }[where]
    return np.logical_or.reduce([test(t) for t in texts])


MAX_ALTERNATIVES = 6  # a scan of a million names per text: more is slower than no prefilter


def required_texts(pattern: re.Pattern) -> list[list[str]]:
    """What every match of ``pattern`` contains, lower-cased: lists of texts, each one of whose
    texts is in every match (``c7/add1\\d+$``: ``[["c7/add1"]]``; ``(MatMul|Conv2D)$``:
    ``[["conv2d", "matmul"]]``), read from runs of the pattern's top-level sequence whose every
    match is one of a few texts; the fewest and longest first. ``[]`` when there is none
    (``\\d+``), a text is not ASCII, or ``re``'s parser cannot say. For ASCII names (lower-cased
    alike) a name holding none of a list's texts cannot match, whatever the pattern's flags."""
    try:
        items = list(_sre_parser.parse(pattern.pattern, pattern.flags))
    except Exception:  # noqa: BLE001  (a private parser: then no prefilter, the same answer)
        return []
    runs, run = [], {""}
    for item in [*items, None]:
        texts = None if item is None else _texts(item)
        grown = None if texts is None else _joined(run, texts)
        if grown is not None:
            run = grown
            continue
        runs.append(run)
        run = texts if texts is not None else {""}
    # a text of one character rarely leaves out enough names to pay for its scan
    needs = [sorted(t.lower() for t in run) for run in runs if min(map(len, run)) > 1]
    if not all(_plain(t) for texts in needs for t in texts):
        return []
    return sorted(needs, key=lambda texts: (len(texts), -min(map(len, texts))))


_STARTS = (_sre_constants.AT_BEGINNING, _sre_constants.AT_BEGINNING_STRING)
_ENDS = (_sre_constants.AT_END, _sre_constants.AT_END_STRING)


def exact_texts(pattern: re.Pattern) -> tuple[str, list[str]] | None:
    """For a ``pattern`` that is only a few texts (``matmul``, ``(MatMul|Conv2D)$``,
    ``^model/block_[37]/``): where a name holds one of them (``"in"``, ``"start"``, ``"end"`` or
    ``"whole"``) and the texts (lower-cased for a case-insensitive pattern); else ``None``. On
    ASCII names of one line each (lower-cased, for a case-insensitive pattern), that is the
    regex's answer without ``re``."""
    flags = pattern.flags
    if flags & re.MULTILINE:
        return None
    try:
        items = list(_sre_parser.parse(pattern.pattern, flags))
    except Exception:  # noqa: BLE001  (a private parser: then ``re``, the same answer)
        return None
    start = bool(items) and items[0][0] == _sre_constants.AT and items[0][1] in _STARTS
    end = len(items) > start and items[-1][0] == _sre_constants.AT and items[-1][1] in _ENDS
    texts = _sequence_texts(items[int(start) : len(items) - int(end)], exact=True)
    if texts is None or not all(map(_plain, texts)):
        return None
    where = {(False, False): "in", (True, False): "start", (False, True): "end"}
    folded = (t.lower() for t in texts) if flags & re.IGNORECASE else texts
    return where.get((start, end), "whole"), sorted(folded)


def _plain(text: str) -> bool:
    """Whether numpy finds ``text`` as typed among ASCII names: ASCII, and no NUL (a numpy
    string drops its trailing NULs)."""
    return text.isascii() and "\0" not in text


def _texts(item: tuple, exact: bool = False) -> set[str] | None:
    """Every text one item of a parsed pattern can match, if they are few (``None`` if not):
    a character, a class of characters, a group or a branch of such; anchors and lookarounds
    match the empty text (they consume nothing). ``exact``: no anchors, lookarounds or flags
    in a group, so that a name holds one of the texts where it matches, and only there."""
    op, value = item
    if op == _sre_constants.LITERAL:
        return {chr(value)}
    if op in (_sre_constants.AT, _sre_constants.ASSERT, _sre_constants.ASSERT_NOT):
        return None if exact else {""}
    if op == _sre_constants.IN and all(o == _sre_constants.LITERAL for o, _ in value):
        return {chr(v) for _, v in value} if len(value) <= MAX_ALTERNATIVES else None
    if op == _sre_constants.SUBPATTERN:
        if exact and (value[1] or value[2]):  # (?-i:...) and the like
            return None
        return _sequence_texts(value[-1], exact)
    if op == _sre_constants.BRANCH:
        texts: set[str] = set()
        for branch in value[1]:
            more = _sequence_texts(branch, exact)
            if more is None:
                return None
            texts |= more
        return texts if len(texts) <= MAX_ALTERNATIVES else None
    return None


def _sequence_texts(items, exact: bool = False) -> set[str] | None:
    """Every text a sequence of parsed items can match, if they are few."""
    run: set[str] | None = {""}
    for item in items:
        texts = _texts(item, exact)
        run = None if texts is None else _joined(run, texts)
        if run is None:
            return None
    return run


def _joined(heads: set[str], tails: set[str]) -> set[str] | None:
    """Each of ``heads`` followed by each of ``tails``, if they are few."""
    if len(heads) * len(tails) > MAX_ALTERNATIVES:
        return None
    return {head + tail for head in heads for tail in tails}


def _lowered_text(values: np.ndarray) -> pd.Series | np.ndarray:
    """:func:`_lowered` of names that are all text, without pandas' checks of each."""
    lowered = [value.lower() for value in values]
    longest = max(map(len, lowered), default=0)
    if longest > MAX_FIXED_WIDTH:
        return pd.Series(lowered, dtype=object)
    return np.array(lowered, dtype=f"<U{max(longest, 1)}")


def _lowered(names: pd.Series) -> pd.Series | np.ndarray:
    """``names`` lower-cased, as a fixed-width numpy array unless one is very long."""
    lowered = names.str.lower()
    longest = int(lowered.str.len().max()) if len(lowered) else 0
    if longest > MAX_FIXED_WIDTH:
        return lowered
    return lowered.to_numpy(dtype=f"<U{max(longest, 1)}")


def searchable(names: pd.Series) -> SearchIndex:
    """``names`` ready for :func:`match_names`'s many searches (pass it as ``lowered``)."""
    return SearchIndex(names)


def filter_ops(
    ops: pd.DataFrame,
    text: str = "",
    *,
    regex: bool = False,
    case: bool = False,
    devices: Iterable[str] = (),
    types: Iterable[str] = (),
    lowered: SearchIndex | pd.Series | np.ndarray | None = None,
) -> np.ndarray:
    """Mask of ops matching the search text, one of ``devices`` and one of ``types`` (if any).
    A text such as ``train.py:42`` also matches the ops that line made (:func:`match_source`)."""
    mask = match_names(ops["op"], text, regex=regex, case=case, lowered=lowered)
    if not regex and "source_path" in ops:
        mask = mask | match_source(ops["source_path"], text, case=case)
    devices = list(devices)
    if devices:
        mask &= ops["device"].isin(devices).to_numpy(dtype=bool)
    types = list(types)
    if types:
        mask &= ops["type"].isin(types).to_numpy(dtype=bool)
    return mask


def matching_lines(text_lines: list[str], text: str, *, regex: bool = False, case: bool = False):
    """The log lines that contain the search text (all lines for an empty search)."""
    if not text:
        return text_lines
    series = pd.Series(text_lines, dtype=object)
    return series[match_names(series, text, regex=regex, case=case)].tolist()


def match_source(paths: pd.Series, text: str, *, case: bool = False) -> np.ndarray:
    """Mask of the ops made at the line ``text`` names (``train.py:42``, a path's tail
    ``models/net.py:7``, or the full path), from their ``source_path`` (``/home/me/train.py:42``):
    the same line only, not ``train.py:420``. All False for any other text."""
    if not _SOURCE_QUERY.match(text):
        return np.zeros(len(paths), dtype=bool)
    values = paths.fillna("") if case else paths.fillna("").str.lower()
    wanted = text if case else text.lower()
    return ((values == wanted) | values.str.endswith("/" + wanted.lstrip("/"))).to_numpy(dtype=bool)
