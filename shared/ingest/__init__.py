"""The ingest pipeline: collect markdown from a source, chunk it, embed it, index it."""
