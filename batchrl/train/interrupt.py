"""Ctrl-C for a training run: the first asks the run to stop after its current update (the
driver then checkpoints), the second stops at once and says what was kept. SIGTERM counts
as a Ctrl-C: a scheduler's stop (SLURM at its time limit, Kubernetes, ``timeout``, ``kill``),
which sends SIGKILL only after a grace period, gets the checkpoint instead of losing the work
since the last one; and a run started as a shell's background job, which ignores Ctrl-C,
can still be stopped that way.

Python runs a signal handler only when the main thread next runs Python code, which during a
compiled train phase may be minutes away, and two Ctrl-C in that time arrive as one call. So
a thread here reads the byte the C-level handler writes for every signal
(``signal.set_wakeup_fd``) and sees each Ctrl-C the moment it comes: it answers the first at
once; on the second it interrupts the main thread (``KeyboardInterrupt``, so ``finally``
blocks close env workers and Ray), and if the main thread is inside a compiled program and
does not take the interrupt within ``grace`` seconds, it ends the process (``os._exit``:
checkpoints are written to a temporary directory and renamed, so none is left half written;
env workers exit with their parent).
"""
from __future__ import annotations

import _thread
import logging
import os
import signal
import sys
import threading
from typing import Callable

log = logging.getLogger("batchrl")

EXIT_CODE = 130  # a shell's code for a process ended by SIGINT


class CtrlC:
  """While entered (in the main thread), SIGINT and SIGTERM set ``requested`` instead of
  raising (SIGINT unless it is ignored, SIGTERM unless a handler of the program's own is set).

  Args:
    first: logged at the first Ctrl-C (what will happen now), after ``Ctrl-C: `` or
      ``SIGTERM: ``.
    kept: a line saying what the run keeps (checkpoint step, or none), logged when the
      second Ctrl-C has to end the process itself.
    grace: seconds the main thread has, after the second Ctrl-C, to take the
      ``KeyboardInterrupt`` before the process is ended.
  """

  def __init__(self, first: str, kept: Callable[[], str], *, grace: float = 1.0):
    self.first, self.kept, self.grace = first, kept, grace
    self.requested = False  # read by the driver between updates
    self._presses = 0
    self._aborting = False
    self._own_bytes = 0  # interrupt_main() writes a wakeup byte too: not a key press
    self._taken = threading.Event()  # the main thread has raised KeyboardInterrupt
    self._active = False
    self._signals: tuple[int, ...] = ()
    self._ctrl_c_ignored = False

  def __enter__(self) -> "CtrlC":
    if threading.current_thread() is not threading.main_thread():
      return self  # signals belong to the main thread; elsewhere Ctrl-C stays Python's
    # a process started to ignore Ctrl-C (a shell's background job) still does; SIGTERM is
    # taken only from its default (ending the process), not from a handler set by a caller
    self._ctrl_c_ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    self._signals = tuple(s for s, take in (
        (signal.SIGINT, not self._ctrl_c_ignored),
        (signal.SIGTERM, signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)) if take)
    if not self._signals:
      return self
    self._read, self._write = os.pipe()
    os.set_blocking(self._write, False)
    self._old_handlers = {s: signal.signal(s, self._on_signal) for s in self._signals}
    self._old_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
    self._thread = threading.Thread(target=self._watch, name="batchrl-ctrl-c", daemon=True)
    self._thread.start()
    self._active = True
    return self

  def background_note(self, effect: str) -> str | None:
    """Where this process ignores Ctrl-C (a shell's background job: ``batchrl train ... &``
    in a script), the line that says so and how to stop it instead, ``kill PID`` (SIGTERM,
    taken as a Ctrl-C; ``effect`` says what it does); None where Ctrl-C works. Call it
    while entered."""
    if not self._ctrl_c_ignored:
      return None
    note = "Ctrl-C is ignored in this process (a background job)"
    if signal.SIGTERM not in self._signals:  # a handler of the caller's own: not ours to tell
      return f"{note}."
    return f"{note}: stop it with kill {os.getpid()}, {effect}."

  def __exit__(self, *exc) -> None:
    if not self._active:
      return
    self._active = False
    self._taken.set()  # from here on the main thread handles whatever comes
    for signum, handler in self._old_handlers.items():
      signal.signal(signum, handler)
    signal.set_wakeup_fd(self._old_fd)  # before closing: the fd number could be reused
    os.close(self._write)  # the watcher reads EOF and returns
    self._thread.join(timeout=5.0)
    os.close(self._read)

  def _on_signal(self, signum, frame) -> None:
    """Runs in the main thread, whenever it next runs Python code."""
    del signum, frame
    if self._aborting and not self._taken.is_set():  # once: not again inside the cleanup
      self._taken.set()
      raise KeyboardInterrupt

  def _watch(self) -> None:
    while True:
      try:
        data = os.read(self._read, 64)
      except OSError:
        return
      if not data:
        return
      # bytes of other signals with Python handlers (a timer, Ray's) are not presses
      counts = {s: data.count(s) for s in self._signals}
      own = min(counts[self._signals[0]], self._own_bytes)
      self._own_bytes -= own
      self._press(sum(counts.values()) - own,
                  "SIGTERM" if counts.get(signal.SIGTERM) else "Ctrl-C")

  def _press(self, presses: int, name: str) -> None:
    if presses <= 0:
      return
    self._presses += presses
    if self._presses == 1:
      self.requested = True
      log.warning("%s: %s", name, self.first)
      return
    if self._aborting:  # yet another Ctrl-C while the main thread unwinds: stop now
      self._exit_now()
    self._aborting = True
    if not self._taken.is_set():  # (the signal's own handler call may have raised already)
      self._own_bytes += 1
      # as a signal whose handler is ours (SIGINT unless it is ignored): that handler raises
      _thread.interrupt_main(self._signals[0])
    if not self._taken.wait(self.grace):
      self._exit_now()

  def _exit_now(self) -> None:
    if sys.stderr.isatty():
      sys.stderr.write("\x1b[?25h\n")  # a progress bar hid the cursor: show it again
    log.warning(self.kept())
    for stream in (sys.stdout, sys.stderr):
      try:
        stream.flush()
      except (OSError, ValueError):
        pass
    os._exit(EXIT_CODE)
