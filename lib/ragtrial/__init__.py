"""ragtrial: put GraphRAG on trial against plain retrieval, at a known cost."""

__version__ = "0.1.0"
