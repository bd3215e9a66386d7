"""Fuzzing the members of a ``.tfplace`` (issue 31, "Prove it"): a seeded mutator changes one
or two members of a small valid file (a JSON value swapped for an odd one, a key dropped,
bytes flipped, cut, repeated or inserted, a member left out) a few hundred times. Every load
either succeeds or raises ``TraceError``; a trace that loads can be summarised as
``tfplace show`` does, its findings found, and its Chrome export read back. In a child process
bounded in time, so that a hang fails the test instead of the suite."""

from __future__ import annotations

import json

import pytest
from helpers import run_python

# Processes, sockets, signals and files, not where TensorFlow puts an op: CI runs them once,
# with oneDNN's default (.ci/run's oneDNN-off run leaves out the lifecycle marker).
pytestmark = pytest.mark.lifecycle

FUZZ = r"""
import collections, io, json, random, sys, tempfile, time, traceback, warnings, zipfile
from pathlib import Path

from tfplace_widget import PlacementTrace, TraceError
from tfplace_widget.examples import GPU_TRACES
from tfplace_widget._rendering.text_report import TextOutput, print_summary

warnings.simplefilter("ignore", RuntimeWarning)  # numpy's casts of odd numbers say so
folder = Path(tempfile.mkdtemp())
source = PlacementTrace.from_chrome_trace(
    GPU_TRACES / "ikhlestov-tensorflow-profiling" / "GPU_timeline_01.json"
)
source.findings  # saved with the trace: frames/findings.json
with zipfile.ZipFile(source.save(folder / "valid.tfplace")) as archive:
    valid = {name: archive.read(name) for name in archive.namelist()}
rng = random.Random(SEED)
ODD = [None, True, 0, -1, -(2**63), 2**64, 1e308, -0.0, "", "x" * 300, "\u202e", [], {}, [[]],
       {"a": 1}, "nan", -5]
INSERTS = [b"[", b"{", b",", b'"', b"\\ud800", b"-9223372036854775808", b"1e999", b"\x1b[2J"]


def odd_json(data):
    document = json.loads(data)
    places = []

    def walk(value, path):
        places.append(path)
        items = value.items() if isinstance(value, dict) else (
            enumerate(value[:20]) if isinstance(value, list) else ())
        for key, inner in items:
            walk(inner, path + [key])

    walk(document, [])
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(places)
        if not path:
            return json.dumps(rng.choice(ODD)).encode()
        parent = document
        try:
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, dict) and rng.random() < 0.15:
                del parent[path[-1]]
            else:
                parent[path[-1]] = rng.choice(ODD)
        except (KeyError, IndexError, TypeError):
            pass
    return json.dumps(document).encode()


def odd_bytes(data):
    data = bytearray(data)
    how = rng.randrange(4)
    if how == 0 and data:
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
    elif how == 1:
        del data[rng.randrange(len(data) + 1):]
    elif how == 2 and data:
        at = rng.randrange(len(data))
        data[at:at] = data[at:at + rng.randint(1, 64)] * rng.randint(1, 5)
    else:
        at = rng.randrange(len(data) + 1)
        data[at:at] = rng.choice(INSERTS)
    return bytes(data)


outcomes, failures, slowest = collections.Counter(), [], 0.0
for case in range(CASES):
    members = dict(valid)
    for _ in range(rng.randint(1, 2)):
        name = rng.choice(sorted(members))
        if rng.random() < 0.05:
            del members[name]
        elif name.endswith(".json") and rng.random() < 0.7:
            try:
                members[name] = odd_json(members[name])
            except ValueError:  # already broken by the first change
                members[name] = odd_bytes(members[name])
        else:
            members[name] = odd_bytes(members[name])
    path = folder / "case.tfplace"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    start = time.perf_counter()
    try:
        trace = PlacementTrace.load(path)
    except TraceError:
        outcomes["refused"] += 1
        continue
    except Exception:
        failures.append([case, "load", traceback.format_exc()[-1500:]])
        continue
    finally:
        slowest = max(slowest, time.perf_counter() - start)
    outcomes["loaded"] += 1
    try:  # what a loaded trace promises: it shows, has findings, exports and reads back
        print_summary(trace, TextOutput(io.StringIO(), "never"))
        trace.findings
        if not trace.predicted:
            PlacementTrace.from_chrome_trace(trace.to_chrome_trace(folder / "out.json"))
    except Exception:
        failures.append([case, "use", traceback.format_exc()[-1500:]])
print("RESULT" + json.dumps({"outcomes": outcomes, "failures": failures[:5],
                             "count": len(failures), "slowest": slowest}))
"""


def test_every_mutated_tfplace_loads_or_is_refused_and_a_loaded_one_works(tmp_path):
    code = f"SEED, CASES = 1, 1000\n{FUZZ}"  # on main: 2 failures (a -2**63 time exported)
    result = json.loads(run_python(code, timeout=180).stdout.split("RESULT", 1)[1])
    assert result["count"] == 0, result["failures"]
    # both ends are reached: the mutations are neither all harmless nor all fatal (format 2:
    # most members are typed arrays, whose length is checked exactly, so a cut or an insert
    # there is refused; 85 of 1000 load, against 100+ of format 1's JSON members)
    assert result["outcomes"]["loaded"] > 50 and result["outcomes"]["refused"] > 500, result
