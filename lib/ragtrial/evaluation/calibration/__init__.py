"""Judge-protocol calibration by simulation (notebook 12): a simulated judge with known biases behind the
LLM interface, the kit's own protocols run over many simulated studies with a known truth, the judge's
parameters fitted from a notebook-06 audit, and the smallest design that reaches a target power.
"""
