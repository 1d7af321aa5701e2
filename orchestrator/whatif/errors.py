"""The what-if model's one error: a plan whose model or GPU it does not know."""

from __future__ import annotations

from orchestrator.errors import OrchError


class WhatIfUnknown(OrchError):
    """The plan's model or GPU is not in the what-if model's tables (and no config.json or
    GPU name says what it is): the message names what is missing and where to give it."""
