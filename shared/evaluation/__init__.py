"""Built-in retrieval evaluation: dataset readers, cached corpus ingest, metrics and the ``mem eval`` runner."""
