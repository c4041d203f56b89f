"""``python -m perfmodel``: the ``perfmodel`` command (where the console script is not on PATH, or points at
another checkout)."""

from perfmodel.cli_fast import main

if __name__ == "__main__":
    main()
