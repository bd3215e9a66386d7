"""Real GPU traces recorded by other people, shipped with the package for the notebooks and tests.

No GPU is needed to explore them: ``show_placement(gpu_trace("riptide/timeline.ctf.json"))``.
Where each file came from, and its licence, is in ``gpu_traces/README.md`` and the ``LICENSE``
file of its folder.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

# Through the package, not this file's path: the same folder in a checkout and in an installed
# wheel (a package on disk, so a real path that readers and glob take).
GPU_TRACES = Path(str(resources.files(__name__).joinpath("gpu_traces")))


def gpu_trace(name: str) -> Path:
    """The path of a vendored GPU trace, e.g. ``"kittibox/timeline_01.json"``."""
    path = GPU_TRACES / name
    if not path.is_file():
        available = sorted(
            str(p.relative_to(GPU_TRACES))
            for p in GPU_TRACES.glob("*/*")
            if p.name.endswith((".json", ".xplane.pb"))
        )
        raise FileNotFoundError(
            f"No vendored GPU trace {name!r}. Available: {', '.join(available)}."
        )
    return path
