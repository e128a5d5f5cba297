"""Retrievers: question -> ranked context items, LLM-free unless a retriever lists question
entities or keywords with a model. `base` holds the contract, `registry` the names, `packing` the
one place context is cut to a token budget; one module per retriever family.
"""
