"""The LLM judge: answer pairs and length alignment, the classic and unbiased protocols, cost
estimates before paying, aggregation over trials, and the bias audits.
"""
