"""The ``.tfplace`` format's package (issue 32) reaches no ``model.trace``, counting imports
inside functions too: ``PlacementTrace.save``/``load`` reach it through the package's services
(``tfplace_widget._services``), and it hands back parts, so that no cycle through the trace
exists at run time."""

from __future__ import annotations

from collections import deque

from test_layers import PACKAGE, module_name, package_imports

FORMAT = "tfplace_widget._tfplace_format"
TRACE = "tfplace_widget._model.trace"


def path_to_trace(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    seen, queue = {start}, deque([[start]])
    while queue:
        path = queue.popleft()
        for target in sorted(graph.get(path[-1], ())):
            if target == TRACE:
                return [*path, target]
            if target not in seen:
                seen.add(target)
                queue.append([*path, target])
    return None


def test_the_format_package_never_imports_the_trace_class():
    graph = {module_name(p): package_imports(p) for p in PACKAGE.rglob("*.py")}
    modules = sorted(m for m in graph if m.startswith(FORMAT))
    assert f"{FORMAT}.reader" in modules and f"{FORMAT}.writer" in modules
    chains = [chain for m in modules if (chain := path_to_trace(m, graph))]
    assert not chains, "\n".join(" -> ".join(chain) for chain in chains)
    # save/load delegate to it, through the services
    assert any(FORMAT in target for target in graph["tfplace_widget._services"])
