"""``_sources.wire.field_counts``: each message's occurrences of a field, counted from the
bytes of many serialized ``AllocatorMemoryUsed`` items at once, against the count the parsed
proto gives; and what is not counted (the caller then reads the items field by field)."""

from __future__ import annotations

import numpy as np
import pytest

from tfplace_widget._sources.wire import field_counts

RECORDS = 6  # AllocatorMemoryUsed.allocation_records


def _items(tf, records_each: list[int]) -> list:
    from tensorflow.core.framework import step_stats_pb2

    items = []
    for k, n_records in enumerate(records_each):
        item = step_stats_pb2.AllocatorMemoryUsed(
            allocator_name="GPU_0_bfc" if k % 2 else "cpu",
            total_bytes=(1 << 40) + k,  # varints of several bytes
            peak_bytes=k,  # 0 for the first: absent from the bytes
            live_bytes=300,
        )
        for r in range(n_records):
            item.allocation_records.add(alloc_micros=1_700_000_000_000_000 + r, alloc_bytes=-r)
        items.append(item)
    return items


def _counted(items: list) -> np.ndarray | None:
    parts = [item.SerializeToString() for item in items]
    lengths = np.array([len(p) for p in parts], dtype=np.int64)
    return field_counts(b"".join(parts), lengths, RECORDS)


def test_counts_each_items_records(tf):
    each = [0, 1, 2, 5, 0, 3, 130, 1]  # 130: a long walk for one item while the others end
    items = _items(tf, each)
    items.append(type(items[0])())  # every field zero: no bytes at all
    counted = _counted(items)
    assert counted is not None
    assert counted.tolist() == [len(item.allocation_records) for item in items]
    assert counted.tolist() == [*each, 0]


def test_unknown_fields_of_fixed_sizes_are_stepped_over(tf):
    items = _items(tf, [2, 1])
    items[0].MergeFromString(b"\x39" + bytes(8) + b"\x3d" + bytes(4))  # fields 7 and 7: 64/32-bit
    assert _counted(items).tolist() == [2, 1]


@pytest.mark.parametrize(
    "extra",
    [
        b"\x80\x01\x05",  # field 16: a tag of two bytes
        b"\x3b\x3c",  # a group (wire type 3)
        b"\x38" + b"\xff" * 10 + b"\x01",  # a varint of 11 bytes
    ],
)
def test_what_is_not_counted_is_none(tf, extra):
    parts = [item.SerializeToString() for item in _items(tf, [1, 2])]
    parts[1] += extra
    lengths = np.array([len(p) for p in parts], dtype=np.int64)
    assert field_counts(b"".join(parts), lengths, RECORDS) is None


def test_a_field_past_its_message_is_none(tf):
    parts = [item.SerializeToString() for item in _items(tf, [1, 2])]
    lengths = np.array([len(parts[0]) - 1, len(parts[1]) + 1], dtype=np.int64)  # cut the first
    assert field_counts(b"".join(parts), lengths, RECORDS) is None
