"""Every case of the corpus, by input class."""

from __future__ import annotations

from hostile.corpus import Case
from hostile.corpus.inputs import CASES as INPUTS
from hostile.corpus.runs import CASES as RUNS

CASES: list[Case] = [*INPUTS, *RUNS]
