"""Questions: generators (summary-based, persona-based, graph-text-grounded, ground truth), the
sampling of task and judge questions from a data set, and question quality (entity distribution,
question-retrieval relevance).
"""
