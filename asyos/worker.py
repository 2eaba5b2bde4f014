"""``python -m asyos.worker``: an Asy-OS worker over ZeroMQ (see ``asyos worker -h``)."""

import sys

from .cli.cluster import main_worker

if __name__ == "__main__":
    sys.exit(main_worker())
