"""The pages of one EndpointSlice list: items gathered across pages, the first page's version
kept, the continue token handed back until the last page."""

from __future__ import annotations

from typing import Any

import pytest

from xds_control.discovery.kubernetes.list_watch import Pages


def page(names: list[str], *, version: str = "7", token: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"resourceVersion": version}
    if token is not None:
        metadata.update({"continue": token, "remainingItemCount": 1})
    return {"metadata": metadata, "items": [{"metadata": {"name": n}} for n in names]}


def test_pages_gather_until_no_continue_token() -> None:
    pages = Pages()
    assert pages.add(page(["a", "b"], token="t1")) == "t1"
    assert pages.add(page(["c"], token="")) is None  # an empty token is the last page
    listing = pages.listing()
    assert sorted(listing.items) == ["a", "b", "c"]
    assert listing.resource_version == "7"


def test_the_first_pages_version_is_the_lists() -> None:
    pages = Pages()
    pages.add(page(["a"], version="7", token="t1"))
    pages.add(page(["b"], version="9"))
    assert pages.listing().resource_version == "7"


@pytest.mark.parametrize(
    "bad", [{}, {"metadata": {}}, {"metadata": {"resourceVersion": "1"}, "items": [{}]}, []]
)
def test_a_malformed_page_is_a_value_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="malformed"):
        Pages().add(bad)


def test_a_list_without_pages_has_no_listing() -> None:
    with pytest.raises(ValueError, match="no page"):
        Pages().listing()
