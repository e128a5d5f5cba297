"""The index in a database, searched there: PostgreSQL (`postgres`, the seed-001 experiment's store)
and a Cypher graph store (`cypher`: Kùzu embedded, FalkorDB through its client; seed 004).

The stores sit in `retrieval`, not `index`: what they hold for searching is derived with the
in-memory retrievers' own tokenizer and entity graph (the same terms, degrees and edges), so that each
in-database retriever ranks what its in-memory twin ranks. The layout of the index tables themselves
is `ragtrial.index.database`.
"""
