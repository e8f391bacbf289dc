"""Invalid configs name the field; valid ones parse with the documented defaults."""

from __future__ import annotations

import pytest

from xds_control.config import LbPolicy, parse_config
from xds_control.errors import ConfigError

VALID = """
pools:
  - name: chat
    endpoints:
      - {address: 127.0.0.1:8001, weight: 10}
      - {address: "[::1]:8002"}
listeners:
  - name: gateway
    address: 0.0.0.0:10000
    routes:
      - {name: all, pool: chat}
"""


def problems(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(text=text, source="test.yaml")
    return info.value.problems


def test_valid_config_gets_defaults() -> None:
    config = parse_config(text=VALID)
    pool = config.pools[0]
    assert pool.lb.policy is LbPolicy.MAGLEV
    assert pool.lb.maglev_table_size == 65537
    assert pool.endpoints[1].weight == 10
    assert config.xds_address == "0.0.0.0:18000"
    assert config.admin_address == "127.0.0.1:9902"
    route = config.listeners[0].routes[0]
    assert [k.header for k in route.hash_policy] == ["x-session-id", "x-prefix-hash"]


def test_route_naming_a_missing_pool() -> None:
    text = VALID.replace("pool: chat", "pool: chatt")
    assert problems(text) == [("listeners[0].routes[0].pool", "no pool named 'chatt' (chat)")]


def test_duplicate_names() -> None:
    text = VALID.replace(
        "listeners:", "  - name: chat\n    endpoints: [{address: 127.0.0.1:9}]\nlisteners:"
    )
    [(path, message)] = problems(text)
    assert path == "pools[1].name"
    assert "duplicate name 'chat'" in message


def test_one_server_listed_twice_in_a_pool_is_refused_naming_both_entries() -> None:
    text = VALID.replace(
        '- {address: "[::1]:8002"}', '- {address: "[::1]:8002"}\n      - {address: "[0:0::1]:8002"}'
    )
    [(path, message)] = problems(text)
    assert path == "pools[0].endpoints[2].address"
    assert message == "duplicate address '[::1]:8002' (first at pools[0].endpoints[1].address)"


def test_bad_address() -> None:
    [(path, message)] = problems(VALID.replace("127.0.0.1:8001", "127.0.0:8001"))
    assert path == "pools[0].endpoints[0].address"
    assert "not an IPv4 or IPv6 address" in message


def test_bad_port() -> None:
    [(path, message)] = problems(VALID.replace("127.0.0.1:8001", "127.0.0.1:80000"))
    assert path == "pools[0].endpoints[0].address"
    assert "1..65535" in message


def test_weight_zero() -> None:
    [(path, message)] = problems(VALID.replace("weight: 10", "weight: 0"))
    assert path == "pools[0].endpoints[0].weight"
    assert "greater than or equal to 1" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", "the file is empty"), ("pools: [", "not valid YAML"), ("- a\n- b\n", "mapping")],
)
def test_not_a_config_at_all(text: str, expected: str) -> None:
    [(path, message)] = problems(text)
    assert path == ""
    assert expected in message


def test_unknown_field_is_an_error_not_ignored() -> None:
    [(path, message)] = problems(VALID.replace("weight: 10", "wieght: 10"))
    assert (path, message) == ("pools[0].endpoints[0].wieght", "unknown field")


def test_several_errors_are_all_reported() -> None:
    text = VALID.replace("weight: 10", "weight: 0").replace("0.0.0.0:10000", "nowhere")
    paths = [path for path, _ in problems(text)]
    assert paths == ["pools[0].endpoints[0].weight", "listeners[0].address"]


def test_maglev_table_size_must_be_prime() -> None:
    text = VALID.replace("endpoints:\n", "lb: {maglev_table_size: 65536}\n    endpoints:\n", 1)
    [(path, message)] = problems(text)
    assert path == "pools[0].lb.maglev_table_size"
    assert "not prime" in message


def test_environment_overrides_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDS_CONTROL_MODEL_HEADER", "x-served-model")
    monkeypatch.setenv("XDS_CONTROL_ADMIN_ADDRESS", "127.0.0.1:19902")
    config = parse_config(text=VALID + "model_header: x-model-name\n")
    assert config.model_header == "x-served-model"
    assert config.admin_address == "127.0.0.1:19902"


def test_bad_environment_value_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDS_CONTROL_XDS_ADDRESS", "everywhere")
    [(path, _)] = problems(VALID)
    assert path == "xds_address"


@pytest.mark.parametrize(
    ("regex", "reason"),
    [
        ("^(?!internal).*", "invalid perl operator: (?!"),  # Python's re accepts look-aheads
        (r"(a)\1", "invalid escape sequence: \\1"),  # and back-references
        ("[z-a]", "invalid character class range: z-a"),
    ],
)
def test_a_header_regex_envoy_would_reject_is_an_error(regex: str, reason: str) -> None:
    text = VALID.replace(
        "{name: all, pool: chat}",
        "{name: all, pool: chat, match: {headers: [{name: x-tenant, regex: '" + regex + "'}]}}",
    )
    [(path, message)] = problems(text)
    assert path == "listeners[0].routes[0].match.headers[0]"
    assert "is not RE2" in message
    assert reason in message


def test_an_re2_header_regex_is_accepted() -> None:
    text = VALID.replace(
        "{name: all, pool: chat}",
        "{name: all, pool: chat, match: {headers: [{name: x-tenant, regex: 'team-[a-z]+'}]}}",
    )
    assert parse_config(text=text).listeners[0].routes[0].match.headers[0].regex == "team-[a-z]+"


def test_a_band_may_not_wait_longer_than_the_pool_s_max_wait() -> None:
    flow = (
        "    picker:\n      address: 127.0.0.1:9100\n"
        "      flow: {max_wait_s: 5, band_max_wait_s: {medium: 8}}\n"
    )
    text = VALID.replace("    endpoints:\n", flow + "    endpoints:\n", 1)
    [(path, message)] = problems(text)
    assert path == "pools[0].picker.flow"
    assert "band_max_wait_s.medium: 8 s" in message
    assert "max_wait_s (5 s)" in message
    [(path, _)] = problems(text.replace("medium: 8", "urgent: 1"))
    assert path.startswith("pools[0].picker.flow.band_max_wait_s")
