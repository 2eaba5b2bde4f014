"""Transports move bytes between the server state machine and the worker loops.

They hold no algorithm: every decision (apply a push, grant a pull, the staleness gate,
final assembly) is ``asyos.core.server_state``; every step is
``asyos.solvers.worker_loop``.
"""
