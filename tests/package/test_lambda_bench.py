"""bench/lambda_start.py's reading of ``-X importtime``: the Anthropic SDK's imports, by phase.

The bench itself builds the package and runs for about a minute: it is run by hand (and by
``bench/run.py``), not here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import ModuleType

import pytest
from helpers import REPO

IMPORTTIME = """\
import time: self [us] | cumulative | imported package
import time:       100 |        100 |   s3memory._core
import time:       200 |        300 | s3memory
import time:       400 |        700 | handler
MARK first
import time:        50 |         50 |       pydantic
import time:        10 |         60 |     anthropic._types
import time:       100 |        900 |   anthropic
import time:         5 |        905 | s3memory.integrations.anthropic
import time:        20 |         20 | anthropic.lib.tools._beta_runner
MARK warm
"""


@pytest.fixture
def lambda_start(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    import lambda_start

    try:
        yield lambda_start
    finally:
        sys.modules.pop("lambda_start", None)


def test_the_sdks_imports_are_counted_once_each_by_phase(lambda_start: ModuleType) -> None:
    """An ``anthropic`` import counts with what it imported (its cumulative time), once: not
    again for its own submodules, wherever it sits (here under s3memory's adapter); a later
    top-level ``anthropic.*`` import (the SDK's lazy ones) counts too; nothing else does."""
    seconds = lambda_start.sdk_import_seconds(IMPORTTIME)
    assert seconds == {"import": 0.0, "first": pytest.approx(920e-6), "warm": 0.0}
