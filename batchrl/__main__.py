"""``python -m batchrl ...`` is the ``batchrl`` command."""
from batchrl.cli import main

if __name__ == "__main__":
  raise SystemExit(main())
