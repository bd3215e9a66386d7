"""Which ``tf.data`` stage ran a function: the innermost stage event holding the function's run
on its thread, compared in the profile's own picoseconds (``sources.input_pipeline``)."""

from __future__ import annotations

from typing import Any

from tfplace_widget._sources.input_pipeline import input_pipeline_from_xspace

US = 1_000_000  # ps


def _space(events: list[tuple[str, int, int, dict[str, Any]]]) -> bytes:
    """An XSpace whose ``/host:CPU`` plane has one tf.data thread with ``events``: (name,
    offset in ps, duration in ps, stats)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    space = xplane_pb2.XSpace()
    plane = space.planes.add(id=1, name="/host:CPU")
    line = plane.lines.add(id=7, name="tf_data_private_threadpool", timestamp_ns=1_000)
    ids: dict[str, int] = {}
    for name, offset, duration, stats in events:
        meta = ids.setdefault(name, len(ids) + 1)
        plane.event_metadata[meta].id = meta
        plane.event_metadata[meta].name = name
        event = line.events.add(metadata_id=meta, offset_ps=offset, duration_ps=duration)
        for key, value in stats.items():
            stat_id = 100 + list(("id", "name")).index(key)
            plane.stat_metadata[stat_id].id = stat_id
            plane.stat_metadata[stat_id].name = key
            if isinstance(value, int):
                event.stats.add(metadata_id=stat_id, int64_value=value)
            else:
                event.stats.add(metadata_id=stat_id, str_value=value)
    return space.SerializeToString()


def test_a_stage_that_ended_before_the_run_in_the_same_microsecond_does_not_hold_it():
    """Keras's adapter: the permutation ``map`` reads its ``ForeverRepeat`` input (a GetNext of
    half a µs), then runs its function 0.1 µs later. In whole µs the repeat's event ends where
    the run starts; the run is the Map's (was: ForeverRepeat, on a fast enough machine)."""
    space = _space(
        [
            ("Iterator::Root::Map", 1 * US, 5 * US, {"name": "MapDataset:34"}),
            ("Iterator::Root::Map::ForeverRepeat", 1 * US + 100_000, 500_000, {}),
            ("InstantiatedCapturedFunction::Run", 1 * US + 700_000, 3 * US, {"id": 9}),
            ("ExecutorState::Process", 1 * US + 800_000, 2 * US, {"id": 9}),
        ]
    )
    pipeline = input_pipeline_from_xspace(space)
    assert pipeline.stages == ["Map (MapDataset:34)"]
    (thread,) = pipeline.threads
    assert pipeline.stage_at(thread, 3) == "Map (MapDataset:34)"


def test_a_run_inside_a_nested_stage_is_that_stages():
    """The innermost stage still holding the run names it: a FlatMap inside the Map."""
    space = _space(
        [
            ("Iterator::Root::Map", 1 * US, 9 * US, {"name": "MapDataset:34"}),
            ("Iterator::Root::Map::FlatMap", 2 * US, 5 * US, {"name": "FlatMapDataset:36"}),
            ("InstantiatedCapturedFunction::Run", 3 * US, 1 * US, {"id": 4}),
            ("ExecutorState::Process", 3 * US, 1 * US, {"id": 4}),
        ]
    )
    pipeline = input_pipeline_from_xspace(space)
    assert pipeline.stages == ["FlatMap (FlatMapDataset:36)"]
