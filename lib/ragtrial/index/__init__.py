"""The graph index: its tables, and one verb-named module per build stage, run in the order
`ragtrial.index.build` lists them (chunk -> extract graph (NLP / LLM / import) -> merge ->
create communities -> create community reports -> embed), plus `inspect` for what a report shows
of an index (origins, coverage, scores against a gold graph).
"""
