"""The doors to a model: the LLM and embedding clients, the middleware every call goes through
(cache, concurrency limit, retries, metrics), structured output, the response cache, the cost
ledger, token counting, and the embedded default server with its backend check.
"""
