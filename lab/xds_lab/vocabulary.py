"""The words lab prompts are made of, shared by the load generator that writes them and the
simulator's tokenizer that reads them (``xds_lab.sim.tokenizer``)."""

from __future__ import annotations

__all__ = ["VOCABULARY"]

_SYLLABLES = ("ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "zu", "da", "ho")

VOCABULARY = tuple(a + b + c for a in _SYLLABLES for b in _SYLLABLES for c in _SYLLABLES)
"""1,728 three-syllable words: unique prompts drawn from them practically never share a
16-word block by chance."""
