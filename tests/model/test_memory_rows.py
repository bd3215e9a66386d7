"""``trace.memory`` as data: records added to a TF2 trace's frame (an XLA cluster's buffers,
read apart from the ops' own) count in the same live bytes as the ops' own."""

from __future__ import annotations

from tfplace_widget._model.memory import PERSISTENT, TEMPORARY, add_step_rows, memory_frame

CPU0 = "/job:localhost/replica:0/task:0/device:CPU:0"


def test_added_rows_join_the_steps_live_bytes_in_time_order():
    held = memory_frame(
        [CPU0, CPU0, CPU0],
        ["mklcpu"] * 3,
        [0, 10, 50],
        [4096, 100, -100],
        ["w", "a", "a"],
        [-1, 0, 0],
        [0, 1, 1],
        [PERSISTENT, TEMPORARY, TEMPORARY],
    )
    memory = add_step_rows(held, [CPU0, CPU0], ["mklcpu"] * 2, [20, 40], [1000, -1000], ["f"] * 2)
    assert memory["op"].tolist() == ["w", "a", "f", "f", "a"]
    assert memory["kind"].tolist() == [PERSISTENT] + [TEMPORARY] * 4
    # the persistent row keeps its own sum; the step's rows sum together, from 0
    assert memory["live_bytes"].tolist() == [4096, 100, 1100, 100, 0]
    assert add_step_rows(held, [], [], [], [], []) is held
