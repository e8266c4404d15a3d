"""Infos of a batch: built as columns in the workers, merged into Gymnasium vector infos.

Gymnasium's vector infos are ``{key: array [N], "_key": mask [N]}`` (nested dicts for nested
infos). Building them env by env in the parent costs more than a cheap env step, so each
worker turns its envs' infos into columns (or, when every env returned the same scalar keys,
as MuJoCo envs do each step, one record array), and the parent joins byte buffers.

    columns = info_columns([(0, {"x": 1.0}), (2, {"x": 3.0})])   # in a worker
    merge_infos([columns], n=4)  # {"x": [1, 0, 3, 0], "_x": [T, F, T, F]}
"""
from __future__ import annotations

import functools

import numpy as np


def info_columns(pairs: list) -> dict:
  """[(env index, info dict)] -> {key: column}, cheap to pickle; merged by ``merge_infos``.

  A column is (env indices, dtype, item shape, raw bytes) when every value is a number or
  a numeric array of one shape (the common case: pickling numpy scalars one by one is
  slow), else (env indices, None, None, values).
  """
  grouped: dict[str, tuple[list, list]] = {}
  for i, info in pairs:
    for key, value in info.items():
      column = grouped.get(key)
      if column is None:
        grouped[key] = column = ([], [])
      column[0].append(i)
      column[1].append(value)
  return {key: _column(index, values) for key, (index, values) in grouped.items()}


def _column(index: list, values: list) -> tuple:
  if not isinstance(values[0], (dict, str, bytes)):
    try:
      arr = np.asarray(values)
    except ValueError:  # ragged arrays
      arr = None
    if arr is not None and arr.dtype.kind in "biuf" and arr.shape[:1] == (len(values),):
      return index, arr.dtype.str, arr.shape[1:], arr.tobytes()
  return index, None, None, values


_SCALARS = (float, int, bool, np.floating, np.integer, np.bool_)


def info_block(pairs: list, cache: dict) -> tuple | None:
  """All infos as ONE record array, when every env returned the same keys holding scalars.

  The usual case (MuJoCo envs return a few floats every step), and the cheapest to send and
  to merge: one ``np.array`` call here, one ``np.frombuffer`` in the parent. None otherwise.
  """
  first = pairs[0][1]
  keys = tuple(first)
  layout = (keys, tuple(type(value) for value in first.values()))
  known = cache.get(layout)
  if known is None:
    if not all(isinstance(value, _SCALARS) for value in first.values()):
      return None
    dtype = np.dtype([(key, np.asarray(value).dtype) for key, value in first.items()])
    known = cache[layout] = (dtype, tuple(dtype.descr))  # descr is slow to compute
  dtype, descr = known
  rows = []
  for _, info in pairs:
    if tuple(info) != keys:
      return None
    rows.append(tuple(info.values()))
  try:
    records = np.array(rows, dtype=dtype)
  except (TypeError, ValueError):  # e.g. a later value of another type
    return None
  return [i for i, _ in pairs], descr, records.tobytes()


@functools.lru_cache(maxsize=64)
def _record_dtype(descr: tuple) -> np.dtype:
  return np.dtype(list(descr))


def _block_columns(block: tuple) -> dict:
  index, descr, data = block
  records = np.frombuffer(data, _record_dtype(descr))
  return {name: _column(index, list(records[name])) for name in records.dtype.names}


def collect_infos(reports: list, n: int) -> dict:
  """The vector infos of one command, from the reports of all workers (in env order)."""
  blocks = [report.info_block for report in reports if report.info_block]
  column_sets = [report.infos for report in reports if report.infos]
  if blocks and not column_sets:
    columns = [(index, descr) for index, descr, _ in blocks]
    if len({descr for _, descr in columns}) == 1 and _covers_all(columns, n):
      records = np.frombuffer(bytearray(b"".join(data for _, _, data in blocks)),
                              _record_dtype(blocks[0][1]))
      out, mask = {}, np.ones(n, np.bool_)
      for name in records.dtype.names:
        out[name], out["_" + name] = records[name], mask.copy()
      return out
  column_sets += [_block_columns(block) for block in blocks]
  return merge_infos(column_sets, n) if column_sets else {}


def _column_values(column: tuple):
  index, dtype, shape, payload = column
  if dtype is None:
    return payload
  return np.frombuffer(payload, dtype).reshape(len(index), *shape)


def merge_infos(column_sets: list[dict], n: int) -> dict:
  """Info columns of several workers -> gymnasium vector infos: ``key`` array + ``_key`` mask."""
  parts: dict[str, list] = {}
  for columns in column_sets:
    for key, column in columns.items():
      parts.setdefault(key, []).append(column)
  out = {}
  for key, columns in parts.items():
    if _covers_all(columns, n):  # the common case: every env returned this key
      value = _joined(columns, n)
      out[key] = _merge_column(columns, n) if value is None else value
      out["_" + key] = np.ones(n, np.bool_)
      continue
    mask = np.zeros(n, np.bool_)
    for column in columns:
      mask[column[0]] = True
    out[key], out["_" + key] = _merge_column(columns, n), mask
  return out


def _covers_all(columns: list[tuple], n: int) -> bool:
  """Whether the columns (in env order, each increasing) hold envs 0..n-1 exactly."""
  offset = 0
  for column in columns:
    index = column[0]
    if index[0] != offset or index[-1] != offset + len(index) - 1:
      return False
    offset += len(index)
  return offset == n


def _joined(columns: list[tuple], n: int) -> np.ndarray | None:
  """Numeric columns of one dtype and shape covering all envs: one buffer, no scatter."""
  first = columns[0]
  if first[1] is None or any(column[1:3] != first[1:3] for column in columns):
    return None
  data = bytearray(b"".join(column[3] for column in columns))  # bytearray: writable result
  return np.frombuffer(data, first[1]).reshape(n, *first[2])


def _merge_column(columns: list[tuple], n: int):
  if all(column[1] is not None for column in columns):
    arrays = [_column_values(column) for column in columns]
    if len({a.shape[1:] for a in arrays}) == 1:
      out = np.zeros((n, *arrays[0].shape[1:]), np.result_type(*arrays))
      for column, values in zip(columns, arrays):
        out[column[0]] = values
      return out
  pairs = [(i, value) for column in columns for i, value in zip(column[0], _column_values(column))]
  if all(isinstance(value, dict) for _, value in pairs):  # nested infos, as gymnasium does
    return merge_infos([info_columns(pairs)], n)
  out = np.full(n, None, dtype=object)
  for i, value in pairs:
    out[i] = value
  return out

