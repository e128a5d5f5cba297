"""The words of each notebook's report, one module per notebook family: they word the findings tables."""
