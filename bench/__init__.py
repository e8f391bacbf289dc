"""Benchmarks: ``make bench`` runs them all (see ``__main__``); they print tables, not verdicts."""
