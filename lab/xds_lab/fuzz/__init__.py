"""Coverage-guided fuzzing (atheris, libFuzzer) of the product's byte parsers.

One module per target, each runnable as ``python -m xds_lab.fuzz.<target> -atheris_runs=N``
(``make fuzz`` runs them all): ``config`` (the config file loader), ``endpoints`` (the
endpoints file a ``FileSource`` watches) and ``exposition`` (an engine's /metrics text). A
target raises only when the product broke its rule (an exception other than the one made for
the input's problem, or a non-finite reading); libFuzzer then saves the input that did it.
The hypothesis tests in ``tests/fuzz`` hold the same rules within ``make test``'s budget.
"""

__all__: list[str] = []
