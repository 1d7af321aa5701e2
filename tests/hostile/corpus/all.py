"""Every case of the corpus, by input class."""

from __future__ import annotations

from hostile.corpus import Case
from hostile.corpus.inputs import CASES as INPUTS
from hostile.corpus.locks import CASES as LOCKS

CASES: list[Case] = [*INPUTS, *LOCKS]
