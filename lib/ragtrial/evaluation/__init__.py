"""Evaluation: running methods over questions, the QA / summary metrics, scoring tables with
intervals and paired tests, claim-based comprehensiveness and diversity, and the LLM judge.
"""
