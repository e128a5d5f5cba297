"""`ragtrial open RUN|index [--outputs DIR] [--serve] [--port P]`: a run's report.html (RUN: its id or
a unique prefix of it) or the index page, opened in the browser, or the outputs folder served over
HTTP on 127.0.0.1 (for a machine without a browser: open the printed URL through an SSH tunnel).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import sys
import webbrowser
from pathlib import Path

from ragtrial.config.base import ParamsError

INDEX = "index"
LOOPBACK = "127.0.0.1"


def port_number(text: str) -> int:
    """A TCP port (0: a free one), as argparse reads `--port`: anything else is a one-line error."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port number (0 to 65535; 0: a free one)")
    return port


def add_parser(sub) -> None:
    opening = sub.add_parser(
        "open", help="open a run's report (its id or a unique prefix) or the index page, or serve them"
    )
    opening.add_argument("target", metavar="RUN|index", help="a run id, a unique prefix of one, or index")
    opening.add_argument("--outputs", help="outputs folder (default: <project>/outputs)")
    opening.add_argument(
        "--serve",
        action="store_true",
        help=f"serve the outputs folder on http://{LOOPBACK}:PORT instead of opening a browser "
        "(Ctrl-C stops)",
    )
    opening.add_argument(
        "--port", type=port_number, default=8000, help="port of --serve (default 8000; 0: a free one)"
    )
    opening.set_defaults(handler=open_command)


def page_of(outputs: Path, target: str) -> Path:
    """The page `target` names, relative to `outputs`: `index.html`, or `<run id>/report.html` of the
    one run folder whose id is `target` or starts with it; ParamsError naming the candidates else.
    """
    if target == INDEX:
        if not (outputs / "index.html").is_file():
            raise ParamsError(f"no index page in {outputs} yet: `ragtrial run` writes it")
        return Path("index.html")
    from ragtrial.report.index_page import matching_run, read_run_record, shown_status

    run = matching_run(outputs, target, f", or {INDEX} for the index page")
    page = Path(run) / "report.html"
    if not (outputs / page).is_file():
        record = read_run_record(outputs / run).record or {}
        raise ParamsError(f"run {run} has no report.html yet (status: {shown_status(record)})")
    return page


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def send_head(self):  # type: ignore[no-untyped-def]  # the base class's hook, untyped there
        # a symbolic link inside the outputs folder may point anywhere: serve only what resolves
        # inside the folder, as `clean` treats links
        inside = Path(self.directory).resolve()
        if not Path(self.translate_path(self.path)).resolve().is_relative_to(inside):
            self.send_error(404, "File not found")
            return None
        return super().send_head()


def serve_outputs(outputs: Path, port: int) -> http.server.ThreadingHTTPServer:
    """An HTTP server of the outputs folder on 127.0.0.1 at `port` (0: a free one), bound, not yet serving."""
    handler = functools.partial(_QuietHandler, directory=str(outputs))
    try:
        return http.server.ThreadingHTTPServer((LOOPBACK, port), handler)
    except OSError as err:
        raise ParamsError(f"--port {port}: cannot serve on {LOOPBACK}:{port} ({err.strerror})") from None


def open_command(args: argparse.Namespace) -> int:
    """Open the page in a browser (exit 1 when none is found, naming the file), or serve until Ctrl-C."""
    from ragtrial.config.paths import outputs_dir, project_root

    outputs = outputs_dir(project_root(), args.outputs)
    page = page_of(outputs, args.target)
    if not args.serve:
        uri = (outputs / page).as_uri()
        if not webbrowser.open(uri):
            print(
                f"error: no browser found to open {uri}; try `ragtrial open {args.target} --serve`",
                file=sys.stderr,
            )
            return 1
        print(f"opened {outputs / page}")
        return 0
    server = serve_outputs(outputs, args.port)
    print(
        f"serving {outputs} at http://{LOOPBACK}:{server.server_address[1]}/{page.as_posix()} (Ctrl-C stops)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped")
    finally:
        server.server_close()
    return 0
