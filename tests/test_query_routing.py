"""Query normalisation (tokens, entities) and the routing table for ``method=auto``."""

from __future__ import annotations

import pytest

from shared.search.normalise import normalise_query, split_identifier
from shared.search.routing import ROUTE_RULES, RouteContext, RouteRule, route_query


def _route(text: str, embedder: str = "ok") -> tuple[str, str, list[str]]:
    probes: list[str] = []

    def probe() -> str:
        probes.append(text)
        return embedder

    route = route_query(RouteContext(query=normalise_query(text), embedder_probe=probe))  # type: ignore[arg-type]
    return route.method, route.rule, probes


def test_entities_are_recognised() -> None:
    q = normalise_query("  KubePodCrashLooping on host:8080 after v1.29.3,  code ERESOLVE  #k8s @alice  ")
    assert q.text == "KubePodCrashLooping on host:8080 after v1.29.3, code ERESOLVE #k8s @alice"
    e = q.entities
    assert e.identifiers == ("KubePodCrashLooping",)
    assert e.ports == ("8080",)
    assert e.versions == ("v1.29.3",)
    assert "ERESOLVE" in e.error_codes
    assert e.tags == ("k8s",)
    assert e.mentions == ("alice",)
    assert normalise_query("ORA-00942 and exit code 137").entities.error_codes == ("ORA-00942", "137")
    assert normalise_query("port 6379 refused").entities.ports == ("6379",)
    assert normalise_query("meet at 12:30").entities.ports == ()


def test_identifiers_split_on_case_and_punctuation() -> None:
    assert split_identifier("KubePodCrashLooping") == "Kube Pod Crash Looping"
    assert split_identifier("max_connections") == "max connections"
    assert split_identifier("HTTPServerError") == "HTTP Server Error"
    lexical = normalise_query("KubePodCrashLooping").lexical_text
    assert lexical.startswith("KubePodCrashLooping") and "Kube Pod Crash Looping" in lexical
    assert normalise_query("#redis memory").lexical_text == "redis memory"


def test_control_characters_and_unicode_forms_are_normalised() -> None:
    q = normalise_query("ｐｏｄ\x00restarts\tafter\u200bdeploy")
    assert q.text == "pod restarts after deploy"
    assert q.tokens == ("pod", "restarts", "after", "deploy")


@pytest.mark.parametrize(
    ("text", "method", "rule"),
    [
        ("KubePodCrashLooping", "lexical", "short-query"),
        ("redis oom", "lexical", "short-query"),
        ("why does my pod keep restarting", "hybrid", "default"),
        ("#redis eviction policy explained", "lexical", "tag-or-mention"),
        ("ask @alice about the pgbouncer pools", "lexical", "tag-or-mention"),
    ],
)
def test_routing_rules(text: str, method: str, rule: str) -> None:
    got_method, got_rule, _ = _route(text)
    assert (got_method, got_rule) == (method, rule)


def test_embedder_is_probed_only_when_a_rule_needs_it() -> None:
    assert _route("redis oom")[2] == []
    assert _route("#redis eviction policy explained")[2] == []
    assert len(_route("why does my pod keep restarting")[2]) == 1


@pytest.mark.parametrize("state", ["unavailable", "timeout"])
def test_embedder_down_routes_lexical_and_says_why(state: str) -> None:
    route = route_query(RouteContext(query=normalise_query("why does my pod keep restarting"),
                                     embedder_probe=lambda: state))  # type: ignore[arg-type,return-value]
    assert route.method == "lexical" and route.rule == "embedder-down"
    assert state in route.reason


def test_rules_are_data_that_can_be_retuned() -> None:
    stricter = tuple(
        RouteRule(r.name, r.condition, 6, r.method, r.reason) if r.name == "short-query" else r for r in ROUTE_RULES
    )
    query = normalise_query("why does my pod restart")
    route = route_query(RouteContext(query=query, embedder_probe=lambda: "ok"), stricter)
    assert route.rule == "short-query"
    assert "5 token" in route.reason


def test_a_table_without_a_fallback_or_with_a_typo_fails_loudly() -> None:
    ctx = RouteContext(query=normalise_query("a b c d"), embedder_probe=lambda: "ok")
    with pytest.raises(ValueError, match="unknown condition"):
        route_query(ctx, (RouteRule("typo", "tokens_belw", 3, "lexical", "x"),))
    with pytest.raises(ValueError, match="no route rule matched"):
        route_query(ctx, (RouteRule("short", "tokens_below", 3, "lexical", "x"),))
