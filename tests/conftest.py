"""Fixtures shared by every tier; the helpers they use are in helpers.py."""

import pytest
from helpers import make_dictionary


@pytest.fixture
def dictionary():
    return make_dictionary(40)
