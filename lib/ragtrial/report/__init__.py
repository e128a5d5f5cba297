"""What a reader sees: narrative sentences generated from the tables (one "no claim" rule, one
embedded-model disclaimer), plots, and the HTML report and index pages.
"""
