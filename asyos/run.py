"""``python -m asyos.run``: the entry point users (and ``mpirun``) call."""

import sys

from .cli.run import main

if __name__ == "__main__":
    sys.exit(main())
