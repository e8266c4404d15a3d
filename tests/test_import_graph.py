"""The package's import graph has no cycle, counting imports placed inside functions: a
cycle closed by an import inside a function is still two modules that depend on each other.
A package's ``__init__`` that imports its own children is not a cycle of ideas, so edges from
a module to the package that contains it are left out (importing a child runs its parent
first; that is how packages work)."""
from __future__ import annotations

import ast
from pathlib import Path

import batchrl

ROOT = Path(batchrl.__file__).parent


def _modules() -> dict[str, Path]:
  modules = {}
  for path in ROOT.rglob("*.py"):
    parts = ("batchrl",) + path.relative_to(ROOT).with_suffix("").parts
    if parts[-1] == "__init__":
      parts = parts[:-1]
    modules[".".join(parts)] = path
  return modules


def _imported(name: str, path: Path, known: set[str]) -> set[str]:
  """Modules of ``known`` that ``name`` imports anywhere in its file."""
  package = name if path.name == "__init__.py" else name.rpartition(".")[0]
  found = set()
  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
    if isinstance(node, ast.Import):
      targets = [alias.name for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        parent = package.split(".")[:len(package.split(".")) - node.level + 1]
        base = ".".join(parent + ([node.module] if node.module else []))
      targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
    else:
      continue
    for target in targets:
      while target and target not in known:  # `from a.b import name`: the module a.b
        target = target.rpartition(".")[0]
      if target and target != name and not name.startswith(target + "."):
        found.add(target)
  return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
  """Strongly connected components with more than one module (Tarjan, iterative)."""
  index, low, on_stack, stack, out = {}, {}, set(), [], []
  for root in graph:
    if root in index:
      continue
    work = [(root, iter(sorted(graph[root])))]
    index[root] = low[root] = len(index)
    stack.append(root)
    on_stack.add(root)
    while work:
      node, edges = work[-1]
      for target in edges:
        if target not in index:
          index[target] = low[target] = len(index)
          stack.append(target)
          on_stack.add(target)
          work.append((target, iter(sorted(graph[target]))))
          break
        if target in on_stack:
          low[node] = min(low[node], index[target])
      else:
        work.pop()
        if work:
          low[work[-1][0]] = min(low[work[-1][0]], low[node])
        if low[node] == index[node]:
          component = []
          while True:
            member = stack.pop()
            on_stack.discard(member)
            component.append(member)
            if member == node:
              break
          if len(component) > 1:
            out.append(sorted(component))
  return out


def test_the_package_has_no_import_cycle():
  modules = _modules()
  graph = {name: _imported(name, path, set(modules)) for name, path in modules.items()}
  assert "batchrl.agents.families" in graph and graph["batchrl.agents.families"]
  assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
  graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
  assert _cycles(graph) == [["a", "b", "c"]]
