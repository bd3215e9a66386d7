"""Writing files (issue 21, items 6 and 8): nothing is overwritten unless asked, a full disk
says so and leaves nothing behind, two saves never pick the same file, one rule for --cpus.

Real writers on real traces: a vendored GPU trace (no TensorFlow needed), and a builder traced
for real by ``tfplace run`` in-process. The full disk is a 64 KiB tmpfs mounted here and filled
(skipped, saying why, where mounting is not allowed).
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from tfplace_widget import PlacementTrace, TraceError, TraceWriteError, trace_placement
from tfplace_widget._cli import main
from tfplace_widget._export.output import write_atomically
from tfplace_widget.examples import GPU_TRACES

GPU_01 = GPU_TRACES / "ikhlestov-tensorflow-profiling" / "GPU_timeline_01.json"
OLD = b"someone's file: keep me"
CPU_RULE = "a whole number from 1 to 64 (TensorFlow needs a CPU device)"


@pytest.fixture(scope="module")
def gpu_trace() -> PlacementTrace:
    return PlacementTrace.from_chrome_trace(GPU_01)


def cli(capsys: pytest.CaptureFixture, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def error_line(err: str) -> str:
    """The one ``tfplace: error: ...`` line of ``err``."""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tfplace: error: "), err
    return lines[0]


def existing(path: Path) -> Path:
    path.write_bytes(OLD)
    return path


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture(autouse=True)
def _keep_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", list(sys.path))  # `tfplace run file.py:f` adds its folder


@pytest.fixture
def builder(tmp_path: Path) -> Path:
    """A builder file; ``grabs`` writes the output path itself while it is traced, as another
    process would between tfplace's first check and its save."""
    path = tmp_path / "model.py"
    path.write_text(
        textwrap.dedent(
            f"""
            import tensorflow as tf

            def build():
                return tf.add(tf.ones((2,)), 1.0, name="y")

            def grabs():
                with open({str(tmp_path / "grabbed.tfplace")!r}, "wb") as handle:
                    handle.write({OLD!r})
                return build()

            def fails():
                raise RuntimeError("the builder ran")
            """
        )
    )
    return path


# -- the command line never overwrites without --force -----------------------------------------
def test_run_refuses_an_output_not_named_tfplace_before_tracing(capsys, builder, tmp_path, tf):
    page = existing(tmp_path / "report.html")
    code, out, err = cli(capsys, "run", f"{builder}:fails", "-o", page)
    assert code == 2 and out == ""
    line = error_line(err)
    assert "is a .tfplace file" in line and "report.tfplace" in line, line
    assert page.read_bytes() == OLD
    # A real trace to that name is refused just the same, --force or not: the name lies.
    code, _, err = cli(capsys, "run", f"{builder}:build", "-o", page, "--force")
    assert code == 2 and "report.tfplace" in error_line(err)
    assert page.read_bytes() == OLD
    code, _, err = cli(capsys, "run", f"{builder}:build", "-o", tmp_path / "step")
    assert code == 2 and "step.tfplace" in error_line(err)
    assert files_in(tmp_path) == ["model.py", "report.html"]


def test_run_never_overwrites_without_force(capsys, builder, tmp_path, tf):
    target = existing(tmp_path / "step.TFPLACE")  # the suffix in any case
    code, out, err = cli(capsys, "run", f"{builder}:fails", "-o", target)
    assert code == 2 and out == ""
    line = error_line(err)
    assert "already exists" in line and "--force" in line, line  # refused before running
    assert "the builder ran" not in line
    assert target.read_bytes() == OLD
    code, out, err = cli(capsys, "run", f"{builder}:build", "-o", target, "--force")
    assert (code, err) == (0, ""), err
    assert PlacementTrace.load(target).device_of("y").endswith("CPU:0")


def test_run_keeps_a_file_that_appears_while_it_traces(capsys, builder, tmp_path, tf):
    """The save at the end creates the file exclusively: a file made meanwhile is kept, and the
    trace (minutes of work, maybe) goes to a new name beside it."""
    target = tmp_path / "grabbed.tfplace"
    code, out, err = cli(capsys, "run", f"{builder}:grabs", "-o", target)
    assert code == 2
    line = error_line(err)
    assert "appeared" in line and "grabbed-2.tfplace" in line and "--force" in line, line
    assert target.read_bytes() == OLD
    assert PlacementTrace.load(tmp_path / "grabbed-2.tfplace").device_of("y").endswith("CPU:0")


def test_show_html_never_overwrites_without_force(capsys, tmp_path):
    report = existing(tmp_path / "report.html")
    code, out, err = cli(capsys, "show", GPU_01, "--html", report)
    assert code == 2 and out == ""  # refused before the summary is printed
    line = error_line(err)
    assert "already exists" in line and "--force" in line, line
    assert report.read_bytes() == OLD
    code, out, err = cli(capsys, "show", GPU_01, "--html", report, "--force")
    assert (code, err) == (0, "")
    assert report.read_text().lstrip().lower().startswith("<!doctype html")


@pytest.mark.parametrize("name", ["report.txt", "report", "report.tfplace"])
def test_show_html_refuses_a_name_that_is_not_html(capsys, tmp_path, name):
    code, out, err = cli(capsys, "show", GPU_01, "--html", tmp_path / name)
    assert code == 2 and out == ""
    line = error_line(err)
    assert ".html" in line and "report.html" in line, line
    assert files_in(tmp_path) == []


def test_export_chrome_never_overwrites_without_force(capsys, tmp_path):
    target = existing(tmp_path / "t.json.gz")
    code, out, err = cli(capsys, "export", GPU_01, "--chrome", target)
    assert code == 2 and out == ""
    line = error_line(err)
    assert "already exists" in line and "--force" in line, line
    assert target.read_bytes() == OLD
    code, _, err = cli(capsys, "export", GPU_01, "--chrome", target, "--force")
    assert (code, err) == (0, "")
    assert len(PlacementTrace.from_chrome_trace(target).ops) == 14


@pytest.mark.parametrize("name", ["t.csv", "t.gz", "t"])
def test_export_chrome_refuses_a_name_tfplace_would_not_read_back(capsys, tmp_path, name):
    code, _, err = cli(capsys, "export", GPU_01, "--chrome", tmp_path / name)
    assert code == 2
    line = error_line(err)
    assert ".json" in line and ".json.gz" in line, line
    assert files_in(tmp_path) == []


def test_export_tables_never_overwrite_and_nothing_is_written_when_one_output_is_refused(
    capsys, tmp_path
):
    tables = tmp_path / "tables"
    tables.mkdir()
    existing(tables / "events.csv")
    chrome = tmp_path / "t.json"
    code, out, err = cli(capsys, "export", GPU_01, "--chrome", chrome, "--csv", tables)
    assert code == 2 and out == ""
    line = error_line(err)
    assert "events.csv" in line and "--force" in line, line
    assert files_in(tables) == ["events.csv"] and not chrome.exists()
    assert (tables / "events.csv").read_bytes() == OLD
    code, _, err = cli(capsys, "export", GPU_01, "--csv", tables, "--force")
    assert (code, err) == (0, "")
    assert files_in(tables) == ["events.csv", "ops.csv", "transfers.csv"]
    assert (tables / "events.csv").read_bytes() != OLD


def test_every_writing_command_offers_force(capsys):
    for command in ("show", "export", "run"):
        code, out, _ = cli(capsys, command, "--help")
        assert code == 0 and "--force" in out, command
        assert "replace" in out.split("--force", 2)[-1][:200], command


# -- the Python API: overwrite=True as documented, overwrite=False creates exclusively ---------
WRITERS = {
    "save": (lambda t, p, **kw: t.save(p, **kw), "t.tfplace"),
    "to_html": (lambda t, p, **kw: t.to_html(p, **kw), "t.html"),
    "to_chrome_trace": (lambda t, p, **kw: t.to_chrome_trace(p, **kw), "t.json"),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_writers_replace_by_default_and_refuse_with_overwrite_false(gpu_trace, tmp_path, writer):
    write, name = WRITERS[writer]
    path = existing(tmp_path / name)
    with pytest.raises(TraceWriteError, match="already exists") as caught:
        write(gpu_trace, path, overwrite=False)
    assert isinstance(caught.value, FileExistsError) and caught.value.errno == errno.EEXIST
    assert caught.value.filename == str(path)
    assert path.read_bytes() == OLD and files_in(tmp_path) == [name]
    write(gpu_trace, path)  # the documented default: replaced, atomically
    assert path.read_bytes() != OLD
    fresh = tmp_path / f"new-{name}"
    write(gpu_trace, fresh, overwrite=False)
    assert fresh.exists()


def test_to_csv_with_overwrite_false_writes_none_when_one_exists(gpu_trace, tmp_path):
    existing(tmp_path / "transfers.csv")
    with pytest.raises(FileExistsError, match="transfers.csv"):
        gpu_trace.to_csv(tmp_path, overwrite=False)
    assert files_in(tmp_path) == ["transfers.csv"]
    assert sorted(gpu_trace.to_csv(tmp_path)) == ["events", "ops", "transfers"]


def test_an_exclusive_write_keeps_a_file_made_while_it_writes(tmp_path):
    """Another process creates the path while the new file is being written: it is kept."""
    path = tmp_path / "t.html"

    def write(stream) -> None:
        path.write_bytes(OLD)
        stream.write(b"ours")

    with pytest.raises(FileExistsError, match="already exists"):
        write_atomically(str(path), "the HTML report", write, overwrite=False)
    assert path.read_bytes() == OLD and files_in(tmp_path) == ["t.html"]  # no temporary left


def test_saves_in_the_same_second_never_share_a_file(gpu_trace, tmp_path):
    """Eight Save clicks at once (two kernels, or a double click): eight files, none lost."""
    from tfplace_widget import PlacementPanel

    panel = PlacementPanel(gpu_trace)
    start = threading.Barrier(8)
    paths: list[str] = []
    errors: list[BaseException] = []

    def save() -> None:
        start.wait()
        try:
            paths.append(panel.save(tmp_path))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=save) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        panel.close()
    assert not errors, errors
    assert len(set(paths)) == 8, paths
    assert sorted(files_in(tmp_path)) == sorted(os.path.basename(p) for p in paths)
    for path in paths:
        assert len(PlacementTrace.load(path).ops) == len(gpu_trace.ops)


# -- a full disk -------------------------------------------------------------------------------
TABLE_WRITERS = {
    **WRITERS,
    "to_csv": (lambda t, p, **kw: t.to_csv(p, **kw), "tables"),
}


@pytest.fixture
def full_disk(tmp_path: Path):
    """A 64 KiB tmpfs holding an old file for each writer (``tables/`` for ``to_csv``), then
    filled to the last byte: every write to it is ENOSPC."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        pytest.skip(f"cannot mount a 64 KiB tmpfs to fill (needs root): {done.stderr.strip()}")
    try:
        for writer, (_, name) in TABLE_WRITERS.items():
            if writer == "to_csv":
                os.mkdir(mount / name)
            else:
                existing(mount / name)
        fd = os.open(mount / "filler", os.O_WRONLY | os.O_CREAT)
        try:
            while True:
                os.write(fd, b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def contents(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("writer", sorted(TABLE_WRITERS))
def test_a_full_disk_says_so_and_leaves_nothing_behind(gpu_trace, full_disk, writer):
    write, name = TABLE_WRITERS[writer]
    before = contents(full_disk)  # the old file at the path stays as it was
    with pytest.raises(TraceWriteError) as caught:
        write(gpu_trace, full_disk / name)
    message = str(caught.value)
    assert caught.value.errno == errno.ENOSPC
    assert "disk is full" in message and "free some space" in message, message
    assert "Pick a path you can write to" not in message
    assert contents(full_disk) == before


def test_the_command_line_says_the_disk_is_full(capsys, full_disk):
    before = contents(full_disk)
    code, _, err = cli(capsys, "show", GPU_01, "--html", full_disk / "report.html")
    assert code == 2
    assert "disk is full" in error_line(err)
    assert contents(full_disk) == before


# -- one rule for the number of CPUs -----------------------------------------------------------
@pytest.mark.parametrize("count", ["0", "-3", "65"])
def test_cpus_out_of_range_is_one_message_in_the_cli(capsys, count):
    code, out, err = cli(capsys, "run", "model.py:build", "-o", "t.tfplace", "--cpus", count)
    assert code == 2 and out == ""
    assert err == (
        f"tfplace run: error: argument --cpus: expected {CPU_RULE}, not {count} "
        "(see tfplace run --help)\n"
    )


@pytest.fixture(scope="module")
def ip():
    from IPython.testing import globalipapp

    shell = globalipapp.get_ipython()  # the shell, whichever test file started it
    shell.run_line_magic("load_ext", "tfplace_widget")
    yield shell
    shell.run_line_magic("unload_ext", "tfplace_widget")


@pytest.mark.parametrize("count", ["0", "-3", "65"])
def test_cpus_out_of_range_is_the_same_message_in_the_magic(ip, count):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError) as caught:
        ip.run_cell_magic("tfplace", f"--cpus {count}", "1")
    assert str(caught.value) == f"argument --cpus: expected {CPU_RULE}, not {count}"


@pytest.mark.parametrize("count", [0, -3, 65])
def test_cpus_out_of_range_is_the_same_rule_in_trace_placement(count):
    for key in ("CPU", "cpu"):
        with pytest.raises(ValueError) as caught:
            trace_placement(lambda: None, device_count={key: count})
        assert str(caught.value) == f"device_count[{key!r}] must be {CPU_RULE}, not {count}."
        assert not isinstance(caught.value, TraceError)
