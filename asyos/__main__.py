"""``python -m asyos``: the ``asyos`` console script (``asyos -h``)."""

import sys

from .cli.main import main

if __name__ == "__main__":
    sys.exit(main())
