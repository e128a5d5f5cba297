"""Running notebooks: the run context a notebook opens (`open_run`) and batch execution with
papermill (resumable, one run folder per resolved settings).
"""
