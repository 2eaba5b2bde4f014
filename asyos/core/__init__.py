"""Transport-free, I/O-free core: losses, the OS step, the kept set, validation.

Everything here is numpy + numba only and is shared by every front (sequential solver,
simulator, MPI, ZeroMQ).
"""
