"""The package's import graph has no cycle, counting imports placed inside functions: a
cycle closed by an import inside a function is still two modules that depend on each other.
A package's ``__init__`` that imports its own children is not a cycle of ideas, so edges from
a module to the package that contains it are left out (importing a child runs its parent
first; that is how packages work). For the same reason an import of a package's child from
outside the package counts as an import of the package too: ``batchrl.agent``'s ``__init__``
imports the ``Agent``, so a module the ``Agent`` needs cannot import ``batchrl.agent.runtime``.

And no agent folder imports another: what two agents share lives in a shared home (below).
The algorithms (``batchrl.agents``) import neither the object API (``batchrl.agent``) nor the
environments (``batchrl.envs``): both are built on them."""
from __future__ import annotations

import ast
from pathlib import Path

import batchrl
from batchrl.agents import catalog

ROOT = Path(batchrl.__file__).parent

# The homes every agent may build on: the top-level modules of batchrl/agents (core, family,
# spaces, ...), the family folders below, whose shared parts several agents are made of, and
# batchrl.networks. What two agents share moves down into one of them, so that a change to
# one agent (DQN's losses, say) cannot silently change another (SAC); every other folder of
# batchrl/agents is one agent's, and imports nothing of another agent's.
SHARED_FOLDERS = frozenset({"replay", "actor_critic", "policy_gradient"})
# The lists of agent families (the catalog of their JAX-free entries, and the families with
# their models, both from ``catalog.FOLDERS``): importing every agent folder is their job.
REGISTRIES = frozenset({"batchrl.agents.families", "batchrl.agents.catalog"})
# What the algorithms are below: the object API that wraps them and the environments they
# are run on.
ABOVE_THE_ALGORITHMS = ("batchrl.agent", "batchrl.envs")
# How work is scheduled (threads, host callbacks): the drivers' business (``batchrl.train``,
# e.g. ``host_update``), never an algorithm's. An algorithm is pure; a driver decides how it runs.
SCHEDULING_MODULES = ("threading", "concurrent", "multiprocessing", "batchrl.parts")
SCHEDULING_NAMES = frozenset({"pure_callback", "io_callback", "PartRunner",
                              "ThreadPoolExecutor", "Thread", "host_call"})


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


def _agent_folder(module: str) -> str | None:
  """The folder of batchrl/agents that ``module`` is in or is (``batchrl.agents.dqn.model``
  -> ``dqn``), else None (top-level agents modules, the rest of the package)."""
  parts = module.split(".")
  if parts[:2] != ["batchrl", "agents"] or len(parts) < 3:
    return None
  return parts[2] if (ROOT / "agents" / parts[2]).is_dir() else None


def _cross_agent_edges(graph: dict[str, set[str]], shared: frozenset[str]) -> list[str]:
  """``"importer -> imported"`` for every import of an agent folder (a batchrl/agents folder not
  in ``shared``) from outside it, by any module of batchrl.agents or batchrl.networks but the
  registries."""
  edges = []
  for name in sorted(graph):
    home = name.split(".")[:2]
    if name in REGISTRIES or home not in (["batchrl", "agents"], ["batchrl", "networks"]):
      continue
    source = _agent_folder(name)
    for target in sorted(graph[name]):
      folder = _agent_folder(target)
      if folder is not None and folder not in shared and folder != source:
        edges.append(f"{name} -> {target}")
  return edges


def _with_parent_packages(graph: dict[str, set[str]], packages: set[str]) -> dict[str, set[str]]:
  """``graph`` with an edge to every package (of ``packages``) whose child a module imports
  from outside that package: importing ``a.b.c`` runs ``a.b``'s ``__init__`` first."""
  out = {}
  for name, targets in graph.items():
    parents = set()
    for target in targets:
      parts = target.split(".")
      for i in range(1, len(parts)):
        package = ".".join(parts[:i])
        if package in packages and package != name and not name.startswith(package + "."):
          parents.add(package)
    out[name] = targets | parents
  return out


def _graph() -> dict[str, set[str]]:
  """Every module of the package -> the modules of the package it imports, counting those the
  registries import by name: each agent folder listed in ``catalog.FOLDERS`` (the catalog its
  ``__init__``, ``families`` its ``family.py``) and each trainable family's named configs
  (``batchrl.configs`` its ``batchrl/configs/<name>.py``)."""
  modules = _modules()
  graph = {name: _imported(name, path, set(modules)) for name, path in modules.items()}
  for folder in catalog.FOLDERS:
    graph["batchrl.agents.catalog"].add(f"batchrl.agents.{folder}")
    graph["batchrl.agents.families"].add(f"batchrl.agents.{folder}.family")
  for family in catalog.trainable():
    graph["batchrl.configs"].add(f"batchrl.configs.{family}")
  assert all(target in graph for targets in graph.values() for target in targets)
  return graph


def _run_graph() -> dict[str, set[str]]:
  """``_graph`` with the packages whose ``__init__`` an import runs (``_with_parent_packages``)."""
  packages = {name for name, path in _modules().items() if path.name == "__init__.py"}
  return _with_parent_packages(_graph(), packages)


def _under(module: str, package: str) -> bool:
  return module == package or module.startswith(package + ".")


def _upward_edges(graph: dict[str, set[str]]) -> list[str]:
  """``"importer -> imported"`` for every import of a module of ``ABOVE_THE_ALGORITHMS`` by a
  module of batchrl.agents."""
  return [f"{name} -> {target}" for name in sorted(graph) if _under(name, "batchrl.agents")
          for target in sorted(graph[name])
          if any(_under(target, above) for above in ABOVE_THE_ALGORITHMS)]


def test_the_package_has_no_import_cycle():
  graph = _run_graph()
  assert "batchrl.agents.families" in graph and graph["batchrl.agents.families"]
  assert _cycles(graph) == []


def test_a_child_imported_from_outside_its_package_runs_the_package():
  graph = {"p": {"p.api"}, "p.api": {"x"}, "p.runtime": set(), "x": {"p.runtime"}}
  graph = _with_parent_packages(graph, {"p"})
  assert graph["x"] == {"p.runtime", "p"} and graph["p.api"] == {"x"}
  assert _cycles(graph) == [["p", "p.api", "x"]]


def test_the_cycle_finder_finds_a_cycle_through_three_modules():
  graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
  assert _cycles(graph) == [["a", "b", "c"]]


def test_agent_folders_import_only_themselves_and_shared_homes():
  graph = _graph()
  folders = {_agent_folder(name) for name in graph} - {None}
  assert SHARED_FOLDERS <= folders, "a shared home was renamed: update SHARED_FOLDERS"
  assert {"dqn", "dqfd", "naf", "ddpg", "td3", "sac"} <= folders - SHARED_FOLDERS
  edges = _cross_agent_edges(graph, SHARED_FOLDERS)
  assert not edges, ("agent folders import only themselves and shared homes (" +
                     ", ".join(sorted(SHARED_FOLDERS)) + ", the top-level modules of "
                     "batchrl/agents, batchrl.networks); move what they share into one. "
                     "Offending imports:\n  " + "\n  ".join(edges))


def test_the_cross_agent_check_names_the_offending_edge():
  graph = {"batchrl.agents.td3.model": {"batchrl.agents.ddpg.losses", "batchrl.agents.core",
                                        "batchrl.agents.actor_critic.losses"},
           "batchrl.agents.actor_critic.losses": {"batchrl.agents.dqn.losses"},
           "batchrl.networks.heads": {"batchrl.agents.sac.model"},
           "batchrl.agents.dqn.model": {"batchrl.agents.dqn.losses"},
           "batchrl.agents.families": {"batchrl.agents.dqn.family"},
           "batchrl.agents.catalog": {"batchrl.agents.dqn"}}
  shared = frozenset({"actor_critic"})
  assert _cross_agent_edges(graph, shared) == [
      "batchrl.agents.actor_critic.losses -> batchrl.agents.dqn.losses",
      "batchrl.agents.td3.model -> batchrl.agents.ddpg.losses",
      "batchrl.networks.heads -> batchrl.agents.sac.model"]


def test_the_algorithms_import_neither_the_object_api_nor_the_environments():
  graph = _graph()
  assert "batchrl.agent.api" in graph and "batchrl.envs.core" in graph
  edges = _upward_edges(graph)
  assert not edges, ("no module of batchrl.agents imports " + " or ".join(ABOVE_THE_ALGORITHMS)
                     + " (the algorithms sit below both; move what they need down into "
                     "batchrl.agents or below). Offending imports:\n  " + "\n  ".join(edges))


def test_the_upward_check_names_the_offending_edge():
  graph = {"batchrl.agents.dqn.model": {"batchrl.agents.core", "batchrl.agent.errors"},
           "batchrl.agents.spaces": {"batchrl.envs", "batchrl.specs"},
           "batchrl.agents": {"batchrl.agent"},
           "batchrl.agent.runtime": {"batchrl.agents.core", "batchrl.envs.core"},
           "batchrl.export": {"batchrl.agent.runtime"}}
  assert _upward_edges(graph) == ["batchrl.agents -> batchrl.agent",
                                  "batchrl.agents.dqn.model -> batchrl.agent.errors",
                                  "batchrl.agents.spaces -> batchrl.envs"]


def _scheduling(source: str) -> list[str]:
  """The imports of ``SCHEDULING_MODULES`` and uses of ``SCHEDULING_NAMES`` in ``source``."""
  found = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Import):
      modules, names = [alias.name for alias in node.names], []
    elif isinstance(node, ast.ImportFrom):
      modules, names = [node.module or ""], [alias.name for alias in node.names]
    else:
      modules = []
      names = ([node.id] if isinstance(node, ast.Name) else
               [node.attr] if isinstance(node, ast.Attribute) else [])
    if (any(_under(m, s) for m in modules for s in SCHEDULING_MODULES)
        or SCHEDULING_NAMES.intersection(names)):
      found.append(f"line {node.lineno}: {ast.unparse(node)}")
  return found


def test_the_algorithms_start_no_threads_and_no_host_callbacks():
  offending = {name: found for name, path in _modules().items()
               if _under(name, "batchrl.agents")
               and (found := _scheduling(path.read_text(encoding="utf-8")))}
  assert not offending, ("no module of batchrl.agents schedules work (threads, host "
                         "callbacks): a driver does (batchrl.train.host_update). Found: "
                         f"{offending}")


def test_the_scheduling_check_names_the_offending_lines():
  source = ("import jax\nfrom concurrent.futures import ThreadPoolExecutor\n"
            "from batchrl.parts import LaneSplit\ny = jax.pure_callback(f, s, x)\n"
            "z = jax.jit(f)\n")
  assert _scheduling(source) == [
      "line 2: from concurrent.futures import ThreadPoolExecutor",
      "line 3: from batchrl.parts import LaneSplit",
      "line 4: jax.pure_callback"]


def test_the_measured_constants_import_nothing():
  """``batchrl.measured`` (the numbers measured on one machine) sits below every layer, so
  that any module may read it: it imports nothing at all."""
  path = ROOT / "measured.py"
  imports = [node for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, (ast.Import, ast.ImportFrom))]
  assert not imports, [ast.unparse(node) for node in imports]
