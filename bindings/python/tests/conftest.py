"""Shared fixtures: the shipped seed policies of the repository this package is built from."""

from pathlib import Path

import pytest

import toolwarden

REPO = Path(__file__).resolve().parents[3]
POLICIES = REPO / "policies"
FINANCE = POLICIES / "finance.warden"
CONNECTORS = POLICIES / "connectors.warden"
RETAIL = POLICIES / "retail.warden"


@pytest.fixture(scope="session")
def finance() -> toolwarden.Policy:
    return toolwarden.Policy.from_file(FINANCE)


@pytest.fixture(scope="session")
def connectors() -> toolwarden.Policy:
    return toolwarden.Policy.from_file(str(CONNECTORS))


@pytest.fixture(scope="session")
def retail() -> toolwarden.Policy:
    return toolwarden.Policy.from_file(RETAIL)
