"""The chaos suite's short run (see ``chaos.py``): every chaos kind against the sandbox for
``MESHD_CHAOS_SECONDS`` (default 40) with seed ``MESHD_CHAOS_SEED`` (default 7); at every quiet point
every long-lived client must hold exactly what a fresh client with the same node gets, and agree with
the simulators; the negative control (a client that drops removals) must be caught."""

from __future__ import annotations

import os

from chaos import KINDS, run

SEED = int(os.environ.get("MESHD_CHAOS_SEED", "7"))
SECONDS = float(os.environ.get("MESHD_CHAOS_SECONDS", "40"))


def test_every_long_lived_client_holds_what_a_fresh_one_gets(tmp_path):
    result = run(tmp_path / "state", SEED, SECONDS, list(KINDS), clients=20)
    print(result.summary())
    assert result.checks >= 3, result.summary()
    assert result.control_caught > 0, "the negative control was never caught: " + result.summary()
