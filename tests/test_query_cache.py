"""The query embedding cache: a repeat query is not embedded again, entries expire, Redis shares them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shared.embedding.cache import normalise_query
from tests.conftest import REDIS_URL, wait_for
from tests.query_corpus import QueryCorpus, query_corpus  # noqa: F401

QUESTION = "what should I check when a container keeps getting restarted"


@pytest.fixture
def fresh_query_state() -> Iterator[None]:
    from shared.search.query import reset_query_state

    reset_query_state()
    yield
    reset_query_state()


def _ask(settings, project: str, text: str):  # type: ignore[no-untyped-def]
    from shared.search.query import QueryRequest, run_query

    return run_query(QueryRequest(query=text, projects=[project], method="semantic"), settings)


def test_repeat_query_is_served_from_the_cache(settings, query_corpus, fresh_query_state):  # noqa: F811
    from shared.embedding import get_embedder
    from shared.search.query import query_cache

    embedder = get_embedder(settings)
    text = QUESTION + " (repeat test)"
    first = _ask(settings, query_corpus.alpha, text)
    assert first.results
    assert query_cache(settings).get(embedder.model_id, text) is not None
    misses, hits = embedder.misses, embedder.hits
    # Same query with different spacing: the cache key is the normalised query, so no model call at all.
    second = _ask(settings, query_corpus.alpha, "  " + text.replace(" ", "  ") + " ")
    assert (embedder.misses, embedder.hits) == (misses, hits)
    assert [c.row["id"] for c in second.results] == [c.row["id"] for c in first.results]


def test_entries_expire_after_the_ttl(settings):  # noqa: F811
    from shared.embedding import QueryEmbeddingCache, get_embedder

    now = [1000.0]
    cache = QueryEmbeddingCache(ttl_secs=3600, timer=lambda: now[0])
    embedder = get_embedder(settings)
    vector = cache.embed_query(embedder, QUESTION)
    assert cache.get(embedder.model_id, QUESTION) is not None
    now[0] += 3599
    assert cache.get(embedder.model_id, QUESTION) is not None
    now[0] += 2
    assert cache.get(embedder.model_id, QUESTION) is None
    assert cache.embed_query(embedder, QUESTION).tolist() == pytest.approx(vector.tolist())


def test_redis_backed_cache_is_shared_and_expires(settings, query_corpus, fresh_query_state):  # noqa: F811
    import redis

    from shared.embedding import QueryEmbeddingCache, get_embedder
    from shared.search.query import query_cache

    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError:
        pytest.skip(f"Redis is not reachable at {REDIS_URL}")
    shared_settings = settings.model_copy(update={"redis_url": REDIS_URL, "query_cache_ttl_secs": 2.0})
    embedder = get_embedder(shared_settings)
    text = QUESTION + " (redis test)"
    _ask(shared_settings, query_corpus.alpha, text)
    cache = query_cache(shared_settings)
    key = cache._key(embedder.model_id, text)
    assert client.exists(key)
    assert 0 < client.pttl(key) <= 2000
    # Another process's cache (a new object on the same Redis) sees the vector.
    other = QueryEmbeddingCache(ttl_secs=2.0, redis_url=REDIS_URL)
    assert other.get(embedder.model_id, normalise_query(text)) is not None
    wait_for(lambda: not client.exists(key), timeout=10, message="the Redis entry to expire")
    assert other.get(embedder.model_id, text) is None
