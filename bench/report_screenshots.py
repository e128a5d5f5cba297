"""Screenshots of every report under an outputs folder, as headless Chromium draws them at the width
the reports are laid out for (1400 px): the check, by eye, that tables are formatted, fit the page or
scroll, and hide no column, and that figures are whole.

Run: .venv/bin/python bench/report_screenshots.py [OUTPUTS] [--to FOLDER] [--height PIXELS]
OUTPUTS is the folder `ragtrial run` wrote (default outputs/). One PNG per run folder with a
report.html, named after the run, and index.png of the index page, in FOLDER (default
OUTPUTS/screenshots/). Each shows the top PIXELS (default 2000) of the page. Needs Chromium
(`apt-get install chromium`); exits 1 without it or when a page cannot be drawn, 2 when OUTPUTS is
not a folder.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ragtrial.report.screenshots import WINDOW, chromium, screenshot


def pages(outputs: Path) -> list[tuple[Path, str]]:
    """Every report under `outputs` (named after its run folder) and the index page, if there."""
    found = [(path, path.parent.name) for path in sorted(outputs.glob("*/report.html"))]
    index = outputs / "index.html"
    return found + ([(index, "index")] if index.is_file() else [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outputs", nargs="?", default="outputs", help="the outputs folder (default outputs/)")
    parser.add_argument("--to", help="where the PNGs go (default OUTPUTS/screenshots/)")
    parser.add_argument("--height", type=int, default=WINDOW[1], help="pixels of each page shown")
    args = parser.parse_args(argv)
    outputs = Path(args.outputs)
    if not outputs.is_dir():
        print(f"{outputs}: not a folder (the outputs folder of `ragtrial run`)", file=sys.stderr)
        return 2
    browser = chromium()
    if browser is None:
        print("no Chromium found: install it (apt-get install chromium) to take screenshots", file=sys.stderr)
        return 1
    found = pages(outputs)
    if not found:
        print(f"{outputs}: no report.html or index.html to screenshot")
        return 0
    folder = Path(args.to) if args.to else outputs / "screenshots"
    failed = 0
    for page, name in found:
        try:
            png = screenshot(page, folder / f"{name}.png", (WINDOW[0], args.height), browser)
        except (RuntimeError, OSError) as err:  # one page that cannot be drawn stops not the others
            print(f"FAILED {page}: {err}", file=sys.stderr)
            failed += 1
            continue
        print(f"{png} ({page})")
    print(f"{len(found) - failed} of {len(found)} pages in {folder}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
