"""Retrieval-and-answer methods behind `answer(question) -> Answer`: one shared generator, one
method per way of building the context (retrieval, Selection, Integration, map-reduce), and the
registry of method names.
"""
