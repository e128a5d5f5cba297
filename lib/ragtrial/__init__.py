"""ragtrial: put GraphRAG on trial against plain retrieval, at a known cost."""

import warnings

# tqdm.auto (imported by sentence-transformers and bert-score) warns inside every rendered report that
# ipywidgets is missing; the kit shows no progress bars, so the warning is noise in a report.
warnings.filterwarnings("ignore", message="IProgress not found")

__version__ = "0.1.0"
