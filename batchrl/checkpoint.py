"""Safe, verifiable checkpoints of any JAX/numpy pytree (no pickle anywhere).

Layout of ``directory``::

    ckpt-000000010000/
      state.msgpack        every array leaf, keyed by its pytree path (flax msgpack encoding)
      newest-only.msgpack  the leaves ``save`` was told only the newest checkpoint keeps (a
                           run's replay memory), if any; removed once a later one is written
      manifest.json        format, versions, step, config, counters, leaf table, SHA-256 of
                           files; ``dropped``: the leaves a later checkpoint removed

A leaf of 4 KiB or more is stored as its filled part (``stored_shape`` and ``fill`` in its
leaf entry): the smallest block ``[:a, :b]`` of its first two axes outside of which every
element has the bits of its last element. A replay memory of 1M transitions of which 20k
are written (rows past them zeros, its sum tree's empty leaves 0 and inf) is stored as
those 20k (and the tree's inner nodes); a full one, whole. ``restore`` puts the rest back,
bit for bit (one axis: a memory; two: memories of seeds stacked by ``vmap``). Checkpoints
that stored every leaf whole load as before.

A checkpoint is written into a hidden temporary directory, fsync-ed, and renamed into place,
so a crash leaves either the whole checkpoint or a temporary directory that is ignored and
removed by the next ``save``. ``restore`` verifies the manifest and every file; if the
newest checkpoint is damaged it warns loudly and falls back to the previous good one.

Leaves kept by the newest checkpoint only (``save``'s ``newest_only``) are what makes a
replay run's checkpoints big (its memory, e.g. 1M transitions); the others are small. When a
checkpoint of a later step is installed, older ones lose that file: their manifest is
rewritten (atomically: ``dropped`` names the leaves and the step that dropped them) before
the file is removed, so a crash in between leaves a checkpoint that is whole as its manifest
says, and the next ``save`` removes the orphaned file. ``restore`` of such a checkpoint takes
the dropped leaves from the template.

One process writes to a directory at a time (the trainer); readers may run alongside (a
reader restoring an older checkpoint by step while its file is being dropped may find it
missing and fall back, as for any damaged checkpoint).
"""
from __future__ import annotations

import dataclasses
import datetime
import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import re
import shutil
import time
import uuid
import warnings
from pathlib import Path
from typing import Any, Mapping

import flax
import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from batchrl.errors import CheckpointError
from batchrl.files import fsync_dir, write_atomic

FORMAT = "batchrl-checkpoint"
FORMAT_VERSION = 3  # 2: newest_only / dropped leaves; 3: leaves stored in part (stored_shape);
# each written only by checkpoints that have them, so older readers refuse only what they lack
_PART_MIN_BYTES = 1 << 12  # smaller leaves are stored whole: not worth a scan
_SCAN_BYTES = 1 << 26  # a leaf is compared with its last element this much at a time
STATE_FILE = "state.msgpack"
NEWEST_ONLY_FILE = "newest-only.msgpack"
MANIFEST_FILE = "manifest.json"
_NAME = re.compile(r"^ckpt-(\d+)$")
_TMP_PREFIX = ".tmp-ckpt-"
_TRASH_PREFIX = ".trash-ckpt-"
_LOG = logging.getLogger("batchrl.checkpoint")


class NoCheckpointError(CheckpointError, FileNotFoundError):
  """The directory holds no checkpoint (or none for the requested step)."""


class CheckpointWarning(UserWarning):
  """A restore got less than the newest whole checkpoint: a damaged one was skipped in favour
  of an older one, or (``batchrl.train.rundir``) the one restored holds no replay memory."""


class _Unusable(Exception):
  """Internal: this checkpoint is damaged; the message names the file and the problem."""


@dataclasses.dataclass(frozen=True)
class CheckpointInfo:
  """A checkpoint directory found on disk (not yet verified)."""

  step: int
  path: Path


# --------------------------------------------------------------------------- listing


def list_checkpoints(directory) -> list[CheckpointInfo]:
  """Checkpoints in ``directory``, oldest step first; temporary leftovers are ignored."""
  directory = Path(directory)
  if not directory.is_dir():
    return []
  found = []
  for entry in directory.iterdir():
    match = _NAME.match(entry.name)
    if match and entry.is_dir():
      found.append(CheckpointInfo(int(match.group(1)), entry))
  return sorted(found, key=lambda c: c.step)


def latest_step(directory) -> int | None:
  """Step of the newest checkpoint by name (``restore`` verifies it), or None if none."""
  checkpoints = list_checkpoints(directory)
  return checkpoints[-1].step if checkpoints else None


# --------------------------------------------------------------------------- pytree <-> arrays


def _path_str(path) -> str:
  """``state['params'].mu[0]``: our own spelling, so files do not depend on jax's keystr."""
  parts = ["state"]
  for entry in path:
    if isinstance(entry, jax.tree_util.DictKey):
      parts.append(f"[{entry.key!r}]")
    elif isinstance(entry, jax.tree_util.SequenceKey):
      parts.append(f"[{entry.idx}]")
    elif isinstance(entry, jax.tree_util.GetAttrKey):
      parts.append(f".{entry.name}")
    elif isinstance(entry, jax.tree_util.FlattenedIndexKey):
      parts.append(f"[{entry.key}]")
    else:
      parts.append(f"[{entry}]")
  return "".join(parts)


def _is_typed_key(leaf) -> bool:
  dtype = getattr(leaf, "dtype", None)
  return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


_PLAIN = (np.ndarray, np.generic, jax.Array, bool, int, float, complex)


def _leaf_to_numpy(name: str, leaf) -> tuple[np.ndarray, dict]:
  """The array stored for one leaf, and its manifest entry."""
  if _is_typed_key(leaf):  # new-style keys: store the raw bits, remember the impl
    data = np.asarray(jax.random.key_data(leaf))
    info = {"key_impl": str(jax.random.key_impl(leaf))}
  elif isinstance(leaf, _PLAIN):
    data, info = np.asarray(leaf), {}
  else:
    raise CheckpointError(
        f"leaf {name} is a {type(leaf).__name__}; checkpoints hold arrays and numbers only "
        "(make it a pytree node or an array)")
  if data.dtype == object:
    raise CheckpointError(f"leaf {name} has dtype object; checkpoints hold numeric arrays only")
  info = {"dtype": str(data.dtype), "shape": list(data.shape), **info}
  return data, info


def _flatten_state(state) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
  arrays, table = {}, {}
  for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
    name = _path_str(path)
    if name in arrays:
      raise CheckpointError(f"two leaves of the state are both named {name}; "
                            "use distinct dict keys")
    data, info = _leaf_to_numpy(name, leaf)
    arrays[name], table[name] = _filled_part(data, info)
  return arrays, table


def _bits(data: np.ndarray) -> np.ndarray:
  """``data``'s elements as unsigned ints of the same width, so that comparing them compares
  bits (NaN equals itself, -0.0 differs from 0.0); other widths as ``[..., itemsize]`` bytes."""
  data = np.ascontiguousarray(data)
  if data.dtype.itemsize in (1, 2, 4, 8):
    return data.view(f"u{data.dtype.itemsize}")
  return data.view(np.uint8).reshape(data.shape + (data.dtype.itemsize,))


def _filled_part(data: np.ndarray, info: dict) -> tuple[np.ndarray, dict]:
  """``data`` cut to the block of its first two axes holding every element that differs
  from its last one (module docstring), and its entry saying so; small leaves, and leaves
  with nothing to cut, as they are."""
  if data.nbytes < _PART_MIN_BYTES or data.ndim == 0:
    return data, info
  differs = _differs(_bits(data), data.ndim)
  if differs.ndim == 1:
    block = (_extent(differs),)
  else:
    block = (_extent(differs.any(axis=1)), _extent(differs.any(axis=0)))
  if block == differs.shape:
    return data, info
  part = data[tuple(slice(n) for n in block)]
  fill = data.reshape(-1)[-1:].tobytes().hex()
  return part, {**info, "stored_shape": list(part.shape), "fill": fill}


def _differs(bits: np.ndarray, ndim: int) -> np.ndarray:
  """``bool[a]`` (or ``[a, b]``): whether row ``i`` (or block ``i, j``) of the first axes
  holds an element whose bits differ from the last element's. In slices of about
  ``_SCAN_BYTES``, so that a memory of many GB needs no copy of its size."""
  fill = bits.reshape((-1,) + bits.shape[ndim:])[-1]
  axes = min(ndim, 2)
  step = max(1, _SCAN_BYTES // max(1, bits[0].nbytes))
  chunks = (bits[i:i + step] != fill for i in range(0, bits.shape[0], step))
  return np.concatenate([c.reshape(c.shape[:axes] + (-1,)).any(axis=-1) for c in chunks])


def _extent(mask: np.ndarray) -> int:
  """One past the last True of ``mask``, 0 when none."""
  found = np.flatnonzero(mask)
  return int(found[-1]) + 1 if found.size else 0


def _whole(name: str, data: np.ndarray, info: dict) -> np.ndarray:
  """The whole leaf from its stored part (``_filled_part``): the rest is ``fill``."""
  shape, stored = tuple(info["shape"]), tuple(info["stored_shape"])
  fill = np.frombuffer(bytes.fromhex(info["fill"]), data.dtype)
  if (data.shape != stored or len(stored) != len(shape) or stored[2:] != shape[2:]
      or any(s > n for s, n in zip(stored, shape)) or fill.size != 1):
    raise _Unusable(f"{name}: stored part of shape {data.shape} (fill {info['fill']!r}) does "
                    f"not fit its manifest entry: part {stored} of {shape}")
  whole = np.empty(shape, data.dtype)
  whole[...] = fill  # a copy of the element's bits, not a conversion of its value
  whole[tuple(slice(n) for n in stored)] = data
  return whole


def _expected(leaf) -> tuple[tuple, np.dtype]:
  """Shape and dtype that the stored array for ``leaf`` must have."""
  if _is_typed_key(leaf):
    leaf = jax.eval_shape(jax.random.key_data, leaf)  # works for ShapeDtypeStruct too
  elif isinstance(leaf, (bool, int, float, complex)):
    leaf = np.asarray(leaf)
  return tuple(leaf.shape), np.dtype(leaf.dtype)


def _restore_leaf(leaf, data: np.ndarray, info: dict):
  """``data`` in the form of the template leaf (typed key, jax array, numpy, Python scalar)."""
  if _is_typed_key(leaf):
    impl = jax.random.key_impl(leaf) if isinstance(leaf, jax.Array) else info.get("key_impl")
    return jax.random.wrap_key_data(jnp.asarray(data), impl=impl)
  if isinstance(leaf, (bool, int, float, complex)):
    return type(leaf)(data.item())
  if isinstance(leaf, np.generic):
    return data[()]
  if isinstance(leaf, np.ndarray):
    return data
  if getattr(leaf, "weak_type", False):
    return _weakly_typed(data)
  return jax.device_put(data)


def _weakly_typed(data: np.ndarray):
  """``data`` as a weakly typed jax array, as the template leaf was (a value born from a
  Python scalar, such as gymnax's step counter). Weak typing is part of a compiled
  program's signature: restoring it strongly typed would recompile every program the
  state goes through. JAX has weak types only for its default dtypes; others stay strong."""
  base = jnp.full(data.shape, np.zeros((), data.dtype).item())  # weak, default dtype
  if base.dtype != data.dtype:
    return jax.device_put(data)
  return base.at[...].set(data)


def _leaf_problem(name: str, leaf, data) -> str | None:
  if not isinstance(data, np.ndarray):
    return f"{name}: stored value is a {type(data).__name__}, not an array"
  shape, dtype = _expected(leaf)
  if data.shape != shape or data.dtype != dtype:
    return (f"{name}: template has shape {shape} dtype {dtype}, checkpoint has shape "
            f"{data.shape} dtype {data.dtype}")
  return None


def leaf_names(tree) -> set[str]:
  """The names a checkpoint of ``tree`` stores its leaves under."""
  return {_path_str(path) for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]}


def stacked_size(directory, template) -> int | None:
  """``K`` when the checkpoints in ``directory`` hold ``K`` states like ``template`` stacked
  on a new leading axis (every stored leaf ``[K, *shape]``, as ``vmap`` over K runs makes
  them; leaves the checkpoint does not hold are not compared), else None. Read from the
  newest manifest that parses (no file is verified here: ``restore`` does that)."""
  expected = {_path_str(path): _expected(leaf)[0]
              for path, leaf in jax.tree_util.tree_flatten_with_path(template)[0]}
  for ckpt in reversed(list_checkpoints(directory)):
    try:
      leaves = _read_manifest(ckpt.path, ckpt.step)["leaves"]
      stored = {name: tuple(leaves[name]["shape"]) for name in expected if name in leaves}
    except (_Unusable, KeyError, TypeError):
      continue
    sizes = {shape[0] if len(shape) == len(expected[name]) + 1
             and shape[1:] == expected[name] else None for name, shape in stored.items()}
    return sizes.pop() if len(sizes) == 1 else None
  return None


def _unflatten(template, arrays: dict, manifest: dict, where: Path,
               unused: frozenset = frozenset()):
  """Rebuild ``template``'s structure from stored arrays, or name every mismatching leaf
  (stored leaves named in ``unused`` are left out on purpose, not a mismatch); leaves the
  manifest lists as ``dropped`` are the template's, as they are."""
  path_leaves, treedef = jax.tree_util.tree_flatten_with_path(template)
  table = manifest.get("leaves", {})
  dropped = frozenset(manifest.get("dropped", ()))
  problems, leaves, names = [], [], set()
  for path, leaf in path_leaves:
    name = _path_str(path)
    names.add(name)
    if name not in arrays and name in dropped:
      leaves.append(leaf)
      continue
    if name not in arrays:
      problems.append(f"{name}: in the template but not in the checkpoint")
      continue
    problem = _leaf_problem(name, leaf, arrays[name])
    if problem:
      problems.append(problem)
      continue
    leaves.append(_restore_leaf(leaf, arrays[name], table.get(name, {})))
  problems += [f"{n}: in the checkpoint but not in the template"
               for n in sorted(set(arrays) - names - unused)]
  if problems:
    shown = problems[:20] + ([f"... and {len(problems) - 20} more"] if len(problems) > 20 else [])
    raise CheckpointError(f"checkpoint {where} does not match the template (wrong config or "
                          "network?):\n  " + "\n  ".join(shown))
  return jax.tree_util.tree_unflatten(treedef, leaves)


# --------------------------------------------------------------------------- manifest


def _jsonable(value, where: str):
  """Plain JSON data from configs/counters (dataclasses, numpy/jax scalars, tuples)."""
  if dataclasses.is_dataclass(value) and not isinstance(value, type):
    value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
  if isinstance(value, Mapping):
    return {str(k): _jsonable(v, f"{where}[{k!r}]") for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_jsonable(v, f"{where}[{i}]") for i, v in enumerate(value)]
  if isinstance(value, (np.ndarray, jax.Array)) and np.ndim(value) == 0:
    value = np.asarray(value).item()
  if isinstance(value, np.generic):
    value = value.item()
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  raise CheckpointError(f"{where} is a {type(value).__name__}; manifest values must be numbers, "
                        "strings, lists, dicts or dataclasses of those")


def _version(dist: str) -> str:
  try:
    return importlib.metadata.version(dist)
  except importlib.metadata.PackageNotFoundError:
    return "unknown (not installed)"


def _versions() -> dict[str, str]:
  return {"batchrl": _version("batchrl"), "jax": jax.__version__, "flax": flax.__version__,
          "numpy": np.__version__, "python": platform.python_version()}


def _checksum(body: dict) -> str:
  text = json.dumps(body, sort_keys=True, separators=(",", ":"))
  return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _make_manifest(step: int, config, counters, table: dict, files: dict,
                   newest_only: list[str]) -> dict:
  now = time.time()
  body = {
      "format": FORMAT, "format_version": _format_version(table, newest_only), "step": step,
      "created": datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat(),
      "created_unix": now, "versions": _versions(),
      "config_class": (f"{type(config).__module__}.{type(config).__qualname__}"
                       if dataclasses.is_dataclass(config) else None),
      "config": _jsonable(config, "config"), "counters": _jsonable(counters or {}, "counters"),
      "leaves": table, "files": files, **({"newest_only": newest_only} if newest_only else {}),
  }
  return {**body, "checksum": _checksum(body)}


def _format_version(table: dict, newest_only: list[str]) -> int:
  """The lowest version that reads this checkpoint, so older batchrl reads what it can."""
  if any("stored_shape" in info for info in table.values()):
    return 3
  return 2 if newest_only else 1


def _read_manifest(path: Path, step: int) -> dict:
  file = path / MANIFEST_FILE
  if not file.is_file():
    raise _Unusable(f"{MANIFEST_FILE} is missing")
  try:
    manifest = json.loads(file.read_bytes().decode("utf-8"))
  except (ValueError, UnicodeDecodeError) as e:
    raise _Unusable(f"{MANIFEST_FILE} is not valid JSON (truncated or corrupt): {e}") from e
  if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
    raise _Unusable(f"{MANIFEST_FILE} is not a batchrl checkpoint manifest")
  version = manifest.get("format_version")
  if not isinstance(version, int) or version > FORMAT_VERSION:
    raise _Unusable(f"{MANIFEST_FILE} has format version {version!r}; this batchrl reads up to "
                    f"{FORMAT_VERSION}")
  body = {k: v for k, v in manifest.items() if k != "checksum"}
  if manifest.get("checksum") != _checksum(body):
    raise _Unusable(f"{MANIFEST_FILE} checksum does not match its contents (corrupt)")
  if manifest.get("step") != step:
    raise _Unusable(f"{MANIFEST_FILE} says step {manifest.get('step')!r}, directory says {step}")
  return manifest


# --------------------------------------------------------------------------- verified reading


def _read_verified(path: Path, name: str, meta) -> bytes:
  if not isinstance(meta, dict) or os.path.basename(name) != name or name in ("", ".", ".."):
    raise _Unusable(f"{MANIFEST_FILE} lists a bad file entry {name!r}")
  file = path / name
  if not file.is_file():
    raise _Unusable(f"{name} is missing")
  data = file.read_bytes()
  if len(data) != meta.get("size"):
    raise _Unusable(f"{name} has {len(data)} bytes, the manifest says {meta.get('size')} "
                    "(truncated or overwritten)")
  if hashlib.sha256(data).hexdigest() != meta.get("sha256"):
    raise _Unusable(f"{name} SHA-256 does not match the manifest (corrupt)")
  return data


def _load_verified(ckpt: CheckpointInfo) -> tuple[dict, dict]:
  """Stored arrays and manifest of a checkpoint, or ``_Unusable`` naming the bad file."""
  manifest = _read_manifest(ckpt.path, ckpt.step)
  files = manifest.get("files")
  if not isinstance(files, dict) or STATE_FILE not in files:
    raise _Unusable(f"{MANIFEST_FILE} does not list {STATE_FILE}")
  if manifest.get("newest_only") and NEWEST_ONLY_FILE not in files:
    raise _Unusable(f"{MANIFEST_FILE} names newest-only leaves but does not list "
                    f"{NEWEST_ONLY_FILE}")
  contents = {name: _read_verified(ckpt.path, name, meta) for name, meta in files.items()}
  arrays = {}
  for name in (STATE_FILE, NEWEST_ONLY_FILE):
    if name in contents:
      arrays.update(_decoded(name, contents.pop(name)))
  return _wholes(arrays, manifest.get("leaves")), manifest


def _wholes(arrays: dict, table) -> dict:
  """``arrays`` with every leaf stored in part (``stored_shape``) made whole."""
  table = table if isinstance(table, dict) else {}
  for name, data in arrays.items():
    info = table.get(name)
    if isinstance(info, dict) and "stored_shape" in info and isinstance(data, np.ndarray):
      try:
        arrays[name] = _whole(name, data, info)
      except (KeyError, TypeError, ValueError) as e:
        raise _Unusable(f"{MANIFEST_FILE}: the entry of {name}, stored in part, is "
                        f"malformed: {e!r}") from e
  return arrays


def _decoded(name: str, data: bytes) -> dict:
  try:
    arrays = serialization.msgpack_restore(data)
  except Exception as e:  # hash matched, so this is a writer bug; still never fatal here
    raise _Unusable(f"{name} cannot be decoded: {e}") from e
  if not isinstance(arrays, dict):
    raise _Unusable(f"{name} does not hold a table of arrays")
  return arrays


def _warn_skipped(ckpt: CheckpointInfo, reason: str) -> None:
  message = (f"checkpoint {ckpt.path} is unusable: {reason}; falling back to an older "
             "checkpoint")
  _LOG.warning(message)
  warnings.warn(message, CheckpointWarning, stacklevel=3)


def restore(directory, template, *, step: int | None = None,
            unused: set[str] | frozenset = frozenset()) -> tuple[Any, dict]:
  """Restore the newest good checkpoint into the structure of ``template``.

  ``template`` is a pytree of the same structure (concrete arrays, or ``jax.ShapeDtypeStruct``
  from ``jax.eval_shape``); leaves come back as jax arrays, numpy arrays, Python scalars or
  typed PRNG keys, matching the template. Damaged checkpoints are skipped with a warning; a
  template mismatch is raised at once (older checkpoints would not match either).
  With ``step``, exactly that checkpoint is restored, or an error raised. ``unused``: names
  of leaves (``leaf_names``) a checkpoint may hold that ``template`` leaves out on purpose
  (checkpoints written before a state stopped saving them); they are skipped. Leaves a
  checkpoint no longer holds (``save``'s ``newest_only``, dropped when a later checkpoint was
  written) are the template's, as they are: pass concrete arrays for those.

  Returns ``(state, manifest)``; ``manifest["step"]`` is the step actually restored, and
  ``manifest.get("dropped")`` the names of the leaves taken from the template (none: all
  were stored).
  """
  unused = frozenset(unused)
  checkpoints = list_checkpoints(directory)
  if not checkpoints:
    raise NoCheckpointError(f"no checkpoints in {directory} (looked for ckpt-<step> directories)")
  if step is not None:
    chosen = [c for c in checkpoints if c.step == step]
    if not chosen:
      steps = ", ".join(str(c.step) for c in checkpoints)
      raise NoCheckpointError(f"no checkpoint for step {step} in {directory}; steps: {steps}")
    try:
      arrays, manifest = _load_verified(chosen[0])
    except _Unusable as e:
      raise CheckpointError(f"checkpoint {chosen[0].path} is unusable: {e}") from e
    return _unflatten(template, arrays, manifest, chosen[0].path, unused), manifest
  failures = []
  for ckpt in reversed(checkpoints):
    try:
      arrays, manifest = _load_verified(ckpt)
    except _Unusable as e:
      failures.append(f"{ckpt.path.name}: {e}")
      _warn_skipped(ckpt, str(e))
      continue
    if failures:
      _LOG.warning("restored checkpoint %s after skipping %d damaged one(s)", ckpt.path,
                   len(failures))
    return _unflatten(template, arrays, manifest, ckpt.path, unused), manifest
  raise CheckpointError(f"no usable checkpoint in {directory}:\n  " + "\n  ".join(failures))


# --------------------------------------------------------------------------- writing


def _write_file(path: Path, data: bytes) -> dict:
  with open(path, "xb") as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())
  return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def _remove_leftovers(directory: Path) -> None:
  """Temporary directories of a save that crashed (single writer: none is in progress)."""
  for entry in directory.iterdir():
    if entry.name.startswith((_TMP_PREFIX, _TRASH_PREFIX)) and entry.is_dir():
      _LOG.info("removing leftover %s from an interrupted save", entry)
      shutil.rmtree(entry, ignore_errors=True)


def _install(directory: Path, tmp: Path, step: int) -> Path:
  """Rename ``tmp`` to its final name; a checkpoint of the same step is replaced."""
  final = directory / f"ckpt-{step:012d}"
  trash = None
  if final.exists():
    trash = directory / f"{_TRASH_PREFIX}{step:012d}-{uuid.uuid4().hex[:8]}"
    os.rename(final, trash)
  os.rename(tmp, final)
  fsync_dir(directory)
  if trash is not None:
    shutil.rmtree(trash, ignore_errors=True)
  return final


def _prune(directory: Path, keep: int | None) -> None:
  if keep is None:
    return
  for ckpt in list_checkpoints(directory)[:-keep]:
    shutil.rmtree(ckpt.path, ignore_errors=True)


def _drop_newest_only(directory: Path, step: int) -> None:
  """Checkpoints before ``step`` lose their newest-only file: manifest first (atomic
  rename), then the file, so every state on disk is a whole checkpoint. Never fatal: the
  checkpoint just written is installed; a failure here costs disk, not data."""
  for ckpt in list_checkpoints(directory):
    if ckpt.step >= step or not (ckpt.path / NEWEST_ONLY_FILE).exists():
      continue  # a later one (its run went back to an earlier checkpoint) keeps its file
    try:
      _drop_file(ckpt, step)
    except (_Unusable, OSError) as e:
      _LOG.warning("could not remove %s from %s (it stays, taking disk): %s",
                   NEWEST_ONLY_FILE, ckpt.path, e)


def _drop_file(ckpt: CheckpointInfo, step: int) -> None:
  manifest = _read_manifest(ckpt.path, ckpt.step)
  for leftover in ckpt.path.glob(f".{MANIFEST_FILE}.*.tmp"):  # a crash in an earlier drop
    leftover.unlink(missing_ok=True)
  if NEWEST_ONLY_FILE in manifest.get("files", {}):
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    body["files"] = {k: v for k, v in body["files"].items() if k != NEWEST_ONLY_FILE}
    body["dropped"] = body.pop("newest_only", [])
    body["dropped_by_step"] = step
    write_atomic(ckpt.path / MANIFEST_FILE,
                 json.dumps({**body, "checksum": _checksum(body)}, indent=1))  # syncs the dir
  (ckpt.path / NEWEST_ONLY_FILE).unlink(missing_ok=True)
  fsync_dir(ckpt.path)


def _payloads(arrays: dict, newest_only: frozenset) -> dict[str, dict]:
  """The arrays of each file: ``STATE_FILE`` and, if any, ``NEWEST_ONLY_FILE``."""
  unknown = sorted(newest_only - set(arrays))
  if unknown:
    raise CheckpointError(f"newest_only names leaves the state does not have: "
                          f"{', '.join(unknown[:5])}" + (" ..." if len(unknown) > 5 else ""))
  files = {STATE_FILE: {k: v for k, v in arrays.items() if k not in newest_only}}
  if newest_only:
    files[NEWEST_ONLY_FILE] = {k: arrays[k] for k in sorted(newest_only)}
  return files


def save(directory, step: int, state, *, config=None, counters: Mapping[str, Any] | None = None,
         keep: int | None = 5, newest_only: set[str] | frozenset = frozenset()) -> Path:
  """Write ``state`` as checkpoint ``step`` atomically; returns its directory.

  ``config`` (a dataclass or a dict) and ``counters`` (e.g. env steps, episodes) are stored
  in the manifest as JSON. The newest ``keep`` checkpoints by step are kept (None: all);
  a checkpoint of the same step is replaced. ``newest_only``: names of leaves
  (``leaf_names``) written to their own file, which checkpoints of earlier steps lose once
  this one is installed (a run's replay memory: the disk holds one copy, not ``keep``).
  """
  if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
    raise CheckpointError(f"step must be a non-negative int, got {step!r}")
  if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or keep < 1):
    raise CheckpointError(f"keep must be a positive int or None (keep all), got {keep!r}")
  step = int(step)
  arrays, table = _flatten_state(state)
  parts = _payloads(arrays, frozenset(newest_only))
  del arrays
  directory = Path(directory)
  directory.mkdir(parents=True, exist_ok=True)
  _remove_leftovers(directory)
  tmp = directory / f"{_TMP_PREFIX}{step:012d}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
  tmp.mkdir()
  try:
    files = {}
    while parts:  # one serialized file in memory at a time
      name, part = parts.popitem()
      files[name] = _write_file(tmp / name, serialization.msgpack_serialize(part))
    manifest = _make_manifest(step, config, counters, table, files, sorted(newest_only))
    _write_file(tmp / MANIFEST_FILE, json.dumps(manifest, indent=1).encode("utf-8"))
    fsync_dir(tmp)
    final = _install(directory, tmp, step)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  _prune(directory, keep)
  _drop_newest_only(directory, step)
  return final
