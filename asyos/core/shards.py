"""Pure arithmetic of splitting work among q workers (spec §3.3)."""

from ..errors import InputError


def budget_split(s: int, q: int) -> list[int]:
    """Capacities s_t = s // q + [t < s % q]: Σ s_t = s exactly, each ≥ 1 (needs q ≤ s)."""
    if q < 1:
        raise InputError(f"the number of workers must be at least 1, got {q}")
    if q > s:
        raise InputError(f"{q} workers cannot share a budget of s = {s} features: "
                         f"each worker needs at least one (use at most {s} workers)")
    return [s // q + (1 if t < s % q else 0) for t in range(q)]
