"""Peers run side by side with batchrl in one benchmark run, each in its own venv.

``setup.py`` builds the venv, the ``*_train.py`` scripts each run one peer training job in
it, and ``run.py`` (``run_peer``, ``recorded``) runs them from a benchmark; see run.py's
docstring for the peers and what each reports.
"""
from peers.run import PEERS, PeerError, installed, manifest, recorded, run_peer

__all__ = ["PEERS", "PeerError", "installed", "manifest", "recorded", "run_peer"]
