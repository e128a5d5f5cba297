"""The upstream systems as methods: Microsoft GraphRAG, LightRAG and fast-graphrag, as shipped.

Each system runs in a worker process (its own Python environment when its pins clash with the
kit's), speaking JSON lines over stdin/stdout (`workers/protocol.py` states the protocol), and
sends every model call to the kit's model proxy (`ragtrial.llm.proxy`), so its calls are cached,
counted in the ledger under the method's name and held to the run's model and sampling.
"""
