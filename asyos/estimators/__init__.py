"""scikit-learn fronts (the optional ``sklearn`` extra): one module per family.

Estimators wrap the solvers below them and follow scikit-learn's conventions
(parameters stored verbatim in ``__init__``, checks in ``fit``, fitted attributes end
in ``_``), so they work in ``Pipeline`` and ``GridSearchCV``.  scikit-learn is imported
only here, never by the core.
"""
