"""Every case of the corpus, by input class."""

from __future__ import annotations

from hostile.corpus import Case
from hostile.corpus.inputs import CASES as INPUTS
from hostile.corpus.locks import CASES as LOCKS
from hostile.corpus.loose_ends import CASES as LOOSE_ENDS
from hostile.corpus.runs import CASES as RUNS
from hostile.corpus.servers import CASES as SERVERS

CASES: list[Case] = [*INPUTS, *RUNS, *SERVERS, *LOCKS, *LOOSE_ENDS]
