"""Routing for ``method=auto``: an ordered table of rules, the first that matches decides.

The rules are data (:data:`ROUTE_RULES`): a named condition with a parameter, the method it picks, and
the sentence the response shows. Tuning a threshold or reordering is an edit to the table, not to code.
Conditions are looked up in :data:`CONDITIONS`; a condition that needs the query vector asks the
context for the embedder's state, which embeds the query lazily, so a query routed lexical by an
earlier rule never pays for an embedding.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from shared.search.normalise import NormalisedQuery

Method = Literal["hybrid", "semantic", "lexical"]
EmbedderState = Literal["ok", "unavailable", "timeout"]


@dataclass(frozen=True)
class Route:
    """The method a query runs with, which rule chose it, and why (shown to the caller)."""

    method: Method
    reason: str
    rule: str

    def to_dict(self) -> dict[str, str]:
        """JSON shape of ``route`` in responses."""
        return {"method": self.method, "reason": self.reason, "rule": self.rule}


@dataclass
class RouteContext:
    """What the conditions may look at. ``embedder_state`` runs (once) only if a rule asks for it."""

    query: NormalisedQuery
    embedder_probe: Callable[[], EmbedderState]
    _embedder_state: EmbedderState | None = None

    @property
    def embedder_state(self) -> EmbedderState:
        """``ok``, ``unavailable`` or ``timeout``: the outcome of embedding the query."""
        if self._embedder_state is None:
            self._embedder_state = self.embedder_probe()
        return self._embedder_state


@dataclass(frozen=True)
class RouteRule:
    """When ``condition(context, param)`` holds, run ``method`` and say ``reason`` (a format string)."""

    name: str
    condition: str
    param: float | str | None
    method: Method
    reason: str


def _tokens_below(ctx: RouteContext, param: float | str | None) -> bool:
    return len(ctx.query.tokens) < float(param or 0)


def _has_tag_or_mention(ctx: RouteContext, _param: float | str | None) -> bool:
    return bool(ctx.query.entities.tags or ctx.query.entities.mentions)


def _embedder_not(ctx: RouteContext, param: float | str | None) -> bool:
    return ctx.embedder_state != param


def _always(_ctx: RouteContext, _param: float | str | None) -> bool:
    return True


CONDITIONS: dict[str, Callable[[RouteContext, float | str | None], bool]] = {
    "has_tag_or_mention": _has_tag_or_mention,
    "tokens_below": _tokens_below,
    "embedder_not": _embedder_not,
    "always": _always,
}

# Order matters: cheap, certain rules first; the embedder is probed only when a query got that far.
ROUTE_RULES: tuple[RouteRule, ...] = (
    RouteRule(
        "tag-or-mention", "has_tag_or_mention", None, "lexical",
        "the query names a #tag or @mention: exact matching, with #tags applied as a filter",
    ),
    RouteRule(
        "short-query", "tokens_below", 3, "lexical",
        "{tokens} token(s): too short for meaning search, exact terms decide",
    ),
    RouteRule(
        "embedder-down", "embedder_not", "ok", "lexical",
        "the embedder is {embedder_state}: answering from the lexical engine alone",
    ),
    RouteRule("default", "always", None, "hybrid", "{tokens} tokens: meaning and exact terms both count"),
)


def route_query(ctx: RouteContext, rules: tuple[RouteRule, ...] = ROUTE_RULES) -> Route:
    """The first rule of ``rules`` whose condition holds (the table must end with an ``always`` rule)."""
    for rule in rules:
        condition = CONDITIONS.get(rule.condition)
        if condition is None:
            raise ValueError(f"route rule {rule.name!r} names unknown condition {rule.condition!r}")
        if condition(ctx, rule.param):
            values = {"tokens": len(ctx.query.tokens)}
            if rule.condition == "embedder_not":
                values["embedder_state"] = ctx.embedder_state  # type: ignore[assignment]
            return Route(rule.method, rule.reason.format(**values), rule.name)
    raise ValueError("no route rule matched: the table must end with an 'always' rule")
