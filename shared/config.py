"""The one settings object: every knob of the service, read from ``MEM_*`` environment variables.

Everything else asks :func:`get_settings`; nothing reads ``os.environ`` for a ``MEM_`` name directly.
The README lists the variables; this module is the source of truth for their defaults.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

QUEUES: tuple[str, ...] = ("ingest", "embed", "index", "vault", "diagnosis", "sync")


#: What counts the context optimizer's tokens (``MEM_OPTIMIZER_TOKENIZER``); tokens.py implements each.
OptimizerTokenizer = Literal["cl100k_base", "o200k_base", "embedding"]

class Settings(BaseSettings):
    """Service configuration. Field ``foo_bar`` is set by ``MEM_FOO_BAR``."""

    model_config = SettingsConfigDict(env_prefix="MEM_", extra="ignore")

    # --- where things live -------------------------------------------------------------------
    data_dir: Path = Field(default=Path(".mem"), description="Embedded database, lexical index, vault.")
    database_url: str | None = Field(default=None, description="PostgreSQL+pgvector URL; unset = embedded.")
    redis_url: str | None = Field(default=None, description="Broker, result backend and shared caches.")
    vault_dir: Path | None = Field(default=None, description="Vault working copy; default <data_dir>/vault.")
    vault_remote: str | None = None
    vault_branch: str = "main"

    # --- lexical engine --------------------------------------------------------------------------
    lexical_backend: Literal["auto", "tantivy", "opensearch"] = "auto"
    opensearch_url: str | None = None
    opensearch_user: str | None = None
    opensearch_password: str | None = None
    opensearch_verify_certs: bool = True
    opensearch_timeout_secs: float = 10.0

    # --- embeddings ------------------------------------------------------------------------------
    embedder: Literal["local", "http", "sentence-transformers", "none"] = "local"
    embedding_url: str | None = Field(default=None, description="OpenAI-compatible /v1/embeddings or Ollama.")
    embedding_api: Literal["openai", "ollama", "tei"] = "openai"
    embedding_model: str = "nomic-embed-text"
    embedding_dim: int = 768
    embedding_api_key: str | None = None
    embedding_timeout_secs: float = 10.0
    embed_batch_size: int = 16  # peak RSS of the embed pool: ~390 MB at 8, ~560 MB at 16, ~910 MB at 32 (docs/ingest.md)
    embed_threads: int = 0  # 0 = onnxruntime's default
    embed_cache_entries: int = 4096  # in-process LRU of chunk vectors (about 1.5 KiB each at 384-d)
    query_cache_ttl_secs: float = 3600.0  # query vectors, in Redis when MEM_REDIS_URL is set

    # --- query -----------------------------------------------------------------------------------
    query_embed_timeout_secs: float = 2.0  # slower than this and the query is answered lexically
    query_engine_timeout_secs: float = 5.0  # per engine; a slower engine is reported in `warnings`
    query_threads: int = 8  # the bounded pool that runs engines in parallel
    # bench/query.py on 34.6k real MiniLM vectors: recall@10 vs exact 0.973 at 40, 0.988 at 100, 0.996 at
    # 200; above 100 the planner turns to a slower exact scan on 10k-chunk tables (docs/evaluation.md).
    hnsw_ef_search: int = 100

    # --- diagnosis context -----------------------------------------------------------------------
    reference_project: str | None = Field(
        default="reference", description="Tier 3 of /memory/context: a shared corpus every reader may search."
    )
    context_min_similarity: float = 0.35  # tier 2/3 answer only when the best hit is at least this close

    # --- chunking --------------------------------------------------------------------------------
    chunk_max_tokens: int = 256
    chunk_overlap_tokens: int = 32
    max_document_bytes: int = 2_000_000

    # --- jobs ------------------------------------------------------------------------------------
    job_lease_secs: int = 300
    job_max_attempts: int = 3
    sweep_interval_secs: float = 30.0
    sync_interval_secs: float = 30.0
    broker_poll_secs: float = 0.5

    # --- HTTP ------------------------------------------------------------------------------------
    host: str = "127.0.0.1"
    port: int = 8080
    public_url: str | None = None
    max_body_bytes: int = 64 * 1024
    max_ingest_body_bytes: int = 10 * 1024 * 1024
    cors_origins: str = ""

    # --- auth ------------------------------------------------------------------------------------
    auth: Literal["on", "off"] = "on"
    oidc_issuer: str | None = None
    oidc_jwks_url: str | None = None
    oidc_audience: str | None = None

    # --- rate limits (per principal and endpoint; flask-limiter notation, "" = unlimited) ----------
    rate_limit_enabled: bool = True
    rate_limit_ingest: str = "100/hour"  # POSTs that create work: ingest, vault generate, drafts
    rate_limit_query: str = "1000/hour"  # search, context, diagnosis, optimize
    rate_limit_metadata: str = "100/hour"  # projects, skills, status listings
    rate_limit_jobs: str = "3600/hour"  # polling a job (one poll a second)
    rate_limit_admin: str = "100/hour"  # keys and settings
    rate_limit_storage_url: str | None = Field(
        default=None, description="limits storage URI; default MEM_REDIS_URL, else in-process memory."
    )
    rate_limit_key_prefix: str = "mem-rl"
    idempotency_ttl_secs: int = 24 * 3600

    # --- forge and webhooks ----------------------------------------------------------------------
    forgejo_url: str | None = None
    forgejo_token: str | None = None
    forgejo_repo: str | None = None
    webhook_secret: str | None = None

    # --- optimizer -------------------------------------------------------------------------------
    context_optimizer: Literal["on", "off"] = "on"
    compress_json: bool = True
    compress_logs: bool = True
    compress_code: bool = False
    compress_diff: bool = True
    compress_text: bool = True
    compress_text_select: bool = Field(
        default=True, description="With a query, prose keeps only sentences that hold facts or match it (the rest is one CCR lookup away)."
    )
    ccr_enabled: bool = True
    ccr_max_entries: int = Field(default=1000, ge=1, description="CCR originals kept (least recently used out).")
    ccr_ttl_secs: int = Field(default=3600, ge=1, description="Seconds a CCR original is kept after its last put.")
    optimizer_tokenizer: OptimizerTokenizer = Field(
        default="cl100k_base",
        description="Unit of the optimizer's token counts and budgets: OpenAI BPE (cl100k_base, o200k_base; "
        "vocabularies ship with bpe-openai) or embedding (the embedding model's WordPiece).",
    )
    optimizer_max_input_bytes: int = Field(
        default=8 * 1024 * 1024, ge=1, description="Largest input of one optimize call; over it the API answers 413."
    )

    # --- logging ---------------------------------------------------------------------------------
    log_level: str = "INFO"

    @property
    def resolved_data_dir(self) -> Path:
        """The data directory as an absolute path (it is created on first use)."""
        return self.data_dir.expanduser().resolve()

    @property
    def resolved_vault_dir(self) -> Path:
        """The vault working copy: ``MEM_VAULT_DIR`` or ``<data_dir>/vault``."""
        return (self.vault_dir or self.resolved_data_dir / "vault").expanduser().resolve()

    @property
    def embedded_database(self) -> bool:
        """True when the service runs its own PostgreSQL under the data directory."""
        return not self.database_url

    @property
    def lexical_engine(self) -> Literal["tantivy", "opensearch"]:
        """Which lexical backend is in use: OpenSearch when configured, Tantivy otherwise."""
        if self.lexical_backend != "auto":
            return self.lexical_backend
        return "opensearch" if self.opensearch_url else "tantivy"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (tests call ``get_settings.cache_clear()`` after changing the env)."""
    return Settings()
